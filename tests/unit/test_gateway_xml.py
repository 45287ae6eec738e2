"""Request documents: only UTF-8 without a DTD or entity declaration is parsed."""

from __future__ import annotations

import pytest

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.xml import parse_xml

DTD = '<!DOCTYPE d [<!ENTITY e "x">]><Delete><Object><Key>&e;</Key></Object></Delete>'


def test_a_plain_document_is_parsed() -> None:
    root = parse_xml(
        b"\xef\xbb\xbf<Delete><Object><Key>caf\xc3\xa9</Key></Object></Delete>", "Delete"
    )
    assert root.findtext("Object/Key") == "café"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (DTD.encode(), "DTDs refused"),
        # in UTF-16 the declaration's bytes do not read "<!DOCTYPE": decoding finds it anyway
        (('<?xml version="1.0" encoding="UTF-16"?>' + DTD).encode("utf-16"), "not UTF-8"),
        (b"<Delete>\xff</Delete>", "not UTF-8"),
        (b"<Delete>", "no element found"),
        (b"<Other/>", "expected <Delete>, got <Other>"),
    ],
)
def test_other_documents_are_malformed(body: bytes, why: str) -> None:
    with pytest.raises(S3Error) as err:
        parse_xml(body, "Delete")
    assert err.value.code is S3Code.MALFORMED_XML
    assert why in err.value.message
