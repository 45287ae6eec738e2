"""DeleteObjects and CompleteMultipartUpload documents: every key and part round-trips.

Documents are written with ElementTree (any key S3 allows, escaped as a client escapes it); the
gateway must answer for each key exactly once, as sent, and read each part as listed. Trees of
the documents' element names with any text only get S3 errors.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st

from mirror.gateway import xml
from mirror.gateway.bulk import delete_objects
from mirror.gateway.multipart import _requested_parts
from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import complete_multipart
from tests.fuzz.targets import delete_objects as delete_target
from tests.fuzz.targets.s3_request import BUCKET, s3_request

# XML 1.0 carries every character but the C0 controls other than tab and newline (and \r,
# which parsers normalise), surrogates, U+FFFE and U+FFFF
xml_text = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="".join(map(chr, range(0x20))) + "\ufffe\uffff",
    ),
    max_size=30,
)
refs = st.sampled_from(["main", "protected-prod", "nosuch", "b@d", ""])


def document(root: str, items: list[dict[str, str]], tag: str) -> bytes:
    el = ET.Element(root, xmlns="http://s3.amazonaws.com/doc/2006-03-01/")
    for item in items:
        child = ET.SubElement(el, tag)
        for name, text in item.items():
            ET.SubElement(child, name).text = text
    return ET.tostring(el, encoding="utf-8")


async def answer_delete(body: bytes) -> ET.Element:
    response = await delete_objects(s3_request("POST", f"/{BUCKET}?delete", body))
    return ET.fromstring(bytes(response.body))


@fuzz_settings(40)
@given(st.lists(st.tuples(refs, xml_text).map("/".join), min_size=1, max_size=8, unique=True))
def test_every_key_deleted_is_answered_once_as_sent(keys: list[str]) -> None:
    body = document("Delete", [{"Key": k} for k in keys], "Object")
    root = anyio.run(answer_delete, body)
    answered = [el.findtext("{*}Key") for el in root if el.tag.endswith(("Deleted", "Error"))]
    assert sorted(a or "" for a in answered) == sorted(keys)


@fuzz_settings(40)
@given(
    st.lists(st.integers(1, 10000), min_size=1, max_size=12, unique=True).map(sorted),
    st.data(),
)
def test_listed_parts_are_read_as_listed(numbers: list[int], data: st.DataObject) -> None:
    etags = [data.draw(st.text("0123456789abcdef", min_size=32, max_size=32)) for _ in numbers]
    quoted = data.draw(st.booleans())
    parts = [
        {"PartNumber": str(n), "ETag": f'"{e}"' if quoted else e}
        for n, e in zip(numbers, etags, strict=True)
    ]
    body = document("CompleteMultipartUpload", parts, "Part")
    req = s3_request("POST", "/repo/main/x?uploadId=u", body, key="main/x")
    root = xml.parse_xml(body, "CompleteMultipartUpload")
    assert _requested_parts(req, root, "x") == list(zip(numbers, etags, strict=True))


names = st.sampled_from(
    [
        "Delete",
        "Object",
        "Key",
        "Quiet",
        "VersionId",
        "CompleteMultipartUpload",
        "Part",
        "PartNumber",
        "ETag",
        "ChecksumCRC32",
    ]
)
texts = st.one_of(
    xml_text,
    st.integers(-(10**30), 10**30).map(str),
    # digits int() reads or refuses that str.isdigit() accepts: superscript, circled,
    # full-width, Arabic-Indic
    st.sampled_from(
        ["\u00b2", "\u2460", "\uff11", "\u0663", " 7 ", "1e3", "0x10", "true", "00001"]
    ),
)
trees = st.recursive(
    st.tuples(names, texts, st.just([])),
    lambda children: st.tuples(names, texts, st.lists(children, max_size=4)),
    max_leaves=12,
)


def build(tree: tuple[str, str, list[Any]]) -> ET.Element:
    name, text, children = tree
    el = ET.Element(name)
    el.text = text
    el.extend(build(c) for c in children)
    return el


@fuzz_settings(40)
@given(st.sampled_from(["Delete", "CompleteMultipartUpload"]), st.lists(trees, max_size=5))
def test_documents_of_any_shape_get_s3_errors(root: str, children: list[Any]) -> None:
    el = ET.Element(root)
    el.extend(build(c) for c in children)
    body = ET.tostring(el, encoding="utf-8")
    delete_target.check(body)
    complete_multipart.check(body)


@fuzz_settings(40)
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=4))
def test_part_numbers_and_etags_of_any_text_get_s3_errors(parts: list[tuple[str, str]]) -> None:
    listed = [{"PartNumber": number, "ETag": etag} for number, etag in parts]
    complete_multipart.check(document("CompleteMultipartUpload", listed, "Part"))
