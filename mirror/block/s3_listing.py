"""A dedicated parser of ``ListObjectsV2`` answers, scoped to our own S3 clients.

botocore parses every response through its general-purpose, model-driven XML walker: about
25 µs of CPU per listed key, most of a first sync's CPU at a million keys. This module compiles
the ``ListObjectsV2Output`` shape once into a table of element names and converters and walks
the parsed XML tree with it, producing the very dictionary botocore's walker would.

Only the walk over the body's elements changes. The bytes are still parsed by botocore's own
``_initial_body_parse`` (same XML parser, encoding and malformed-XML error), headers and
``ResponseMetadata`` still come from botocore, error answers (4xx/5xx) never reach this walker,
and the ``after-call`` handler that url-decodes keys (botocore asks for ``EncodingType=url``
unless the caller did) still runs. Whatever the compiled walk does not reproduce exactly (an
element repeated where the model expects one, a conversion failing) falls back to botocore's
walker for the whole body, which then answers or raises as it always did.

The parser is installed per botocore session (:func:`use_fast_listing`), never globally.

A client that needs only each listed object's key, size and ETag (the validator's) can ask for
**key lists** (``parse_listings_once(events, keys_only=True)``): the ``<Contents>`` elements of
a body are then read by one regular expression, without building their XML tree (the tree is
built for the rest of the body, which keeps botocore's checks: a truncated body or an
``<Error>`` inside a 200 is retried as a 500). Each entry of ``Contents`` holds ``Key``,
``Size`` and ``ETag`` only. A body the expression does not read in full (another order of
elements, whitespace it does not expect, CDATA, entities other than XML's own, carriage
returns) is parsed as before, entirely.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, overload
from xml.etree.ElementTree import Element, ParseError, TreeBuilder, XMLParser

from botocore import handlers as botocore_handlers
from botocore.compat import unquote_str
from botocore.model import OperationModel, Shape, StructureShape
from botocore.parsers import ResponseParserFactory, RestXMLParser

__all__ = [
    "LISTED_SHAPES",
    "FastListingParser",
    "FastListingParserFactory",
    "KeyColumns",
    "ListingWalker",
    "check_200_error_once",
    "compile_walker",
    "key_list",
    "listed_keys",
    "parse_listings_once",
    "read_key_page",
    "use_fast_listing",
]

LISTED_SHAPES = frozenset({"ListObjectsV2Output"})
"""Output shapes parsed by the compiled walker; every other shape goes to botocore's."""

_STRING = 0
_INTEGER = 1
_BOOLEAN = 2
_TIMESTAMP = 3
_STRUCTURE = 4
_SCALARS = {
    "string": _STRING,
    "integer": _INTEGER,
    "long": _INTEGER,
    "boolean": _BOOLEAN,
    "timestamp": _TIMESTAMP,
}


class _Unsupported(Exception):
    """The body (or the shape) holds something the compiled walk does not reproduce exactly."""


@dataclass(frozen=True, slots=True)
class _Member:
    name: str
    kind: int
    flattened: bool
    structure: _Structure | None


@dataclass(slots=True)
class _Structure:
    """One structure shape: its members by XML element name (namespace stripped)."""

    members: dict[str, _Member]
    # Element tags as the XML parser gives them ("{namespace}Name") to their member (or None for
    # an element the model does not know), filled on first sight: one dict look-up per element.
    by_tag: dict[str, _Member | None] = field(default_factory=dict)

    def member(self, tag: str) -> _Member | None:
        """Return the member an element's tag stands for, ``None`` for an unknown element."""
        try:
            return self.by_tag[tag]
        except KeyError:
            # botocore strips "{...}" (its regex '{.*}'); XML local names hold no braces.
            found = self.members.get(tag.rpartition("}")[2])
            self.by_tag[tag] = found
            return found


def _compile_structure(shape: StructureShape, depth: int = 0) -> _Structure:
    if depth > 8 or shape.metadata.get("exception") or getattr(shape, "is_tagged_union", False):
        raise _Unsupported(shape.name)
    members: dict[str, _Member] = {}
    for name, member in shape.members.items():
        serialization = member.serialization
        if serialization.get("location") or serialization.get("eventheader"):
            continue  # headers, status code: botocore's own code fills them
        if serialization.get("xmlAttribute"):
            raise _Unsupported(f"{shape.name}.{name}")
        flattened = False
        target: Shape = member
        xml_name = serialization.get("name") or name
        if member.type_name == "list":
            if not serialization.get("flattened"):
                raise _Unsupported(f"{shape.name}.{name}")
            flattened = True
            target = member.member  # type: ignore[attr-defined]
            xml_name = target.serialization.get("name") or xml_name
        if target.type_name == "structure":
            assert isinstance(target, StructureShape)
            members[xml_name] = _Member(
                name, _STRUCTURE, flattened, _compile_structure(target, depth + 1)
            )
        elif target.type_name in _SCALARS:
            members[xml_name] = _Member(name, _SCALARS[target.type_name], flattened, None)
        else:
            raise _Unsupported(f"{shape.name}.{name}: {target.type_name}")
    return _Structure(members)


class ListingWalker:
    """Turns the XML tree of one output shape into botocore's dictionary for that shape.

    Args:
        shape: The operation's output shape (a structure).

    Raises:
        ValueError: the shape holds members the walker does not reproduce (maps, non-flattened
            lists, XML attributes, unions, blobs, floats).
    """

    def __init__(self, shape: StructureShape) -> None:
        try:
            self._root = _compile_structure(shape)
        except _Unsupported as exc:
            raise ValueError(f"shape {shape.name} is not supported: {exc}") from exc

    def walk(self, root: Element, timestamp: Callable[[str], Any]) -> dict[str, Any] | None:
        """Return the dictionary of ``root``, or ``None`` when botocore's walker must decide.

        Args:
            root: The parsed body's root element (its tag is not checked, as in botocore).
            timestamp: The parser's timestamp converter.
        """
        try:
            return _walk(root, self._root, timestamp)
        except (_Unsupported, ValueError, TypeError, OverflowError):
            return None


def _walk(node: Element, structure: _Structure, timestamp: Callable[[str], Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    member_of = structure.member
    for child in node:
        member = member_of(child.tag)
        if member is None:
            continue
        kind = member.kind
        value: Any
        if kind == _STRUCTURE:
            assert member.structure is not None
            value = _walk(child, member.structure, timestamp)
        else:
            text = child.text
            if text is None:
                text = ""
            if kind == _STRING:
                value = text
            elif kind == _TIMESTAMP:
                value = timestamp(text)
            elif kind == _INTEGER:
                value = int(text)
            else:
                value = text == "true"
        name = member.name
        if member.flattened:
            items = parsed.get(name)
            if items is None:
                parsed[name] = [value]
            else:
                items.append(value)
        elif name in parsed:
            # botocore turns a repeated element into a list of nodes and parses that oddly;
            # let it decide rather than guess.
            raise _Unsupported(name)
        else:
            parsed[name] = value
    return parsed


_WALKERS: dict[str, ListingWalker | None] = {}


def compile_walker(shape: Shape | None) -> ListingWalker | None:
    """Return the walker of ``shape`` when it is one of :data:`LISTED_SHAPES`, else ``None``."""
    if shape is None or shape.name not in LISTED_SHAPES or not isinstance(shape, StructureShape):
        return None
    if "payload" in shape.serialization:
        return None
    if shape.name not in _WALKERS:
        try:
            _WALKERS[shape.name] = ListingWalker(shape)
        except ValueError:
            # A model whose listing shape grew unsupported members: botocore parses it all.
            _WALKERS[shape.name] = None
    return _WALKERS[shape.name]


# The rest of a <Contents> element after what is read: anything but its end tag, without
# backtracking (each "<" is taken by one branch only).
_TO_END = rb"[^<]*(?:<(?!/Contents>)[^<]*)*</Contents>"
# One listed object as S3 writes it: Key, LastModified, ETag, checksums, Size, then anything.
_CONTENTS = re.compile(
    rb"<Contents>\s*<Key>([^<]*)</Key>\s*(?:<LastModified>[^<]*</LastModified>\s*)?"
    rb"<ETag>([^<]*)</ETag>\s*(?:<Checksum\w*>[^<]*</Checksum\w*>\s*)*"
    rb"<Size>([0-9]{1,19})</Size>" + _TO_END
)
# A run of <Contents> elements, whatever they hold.
_ANY_CONTENTS = re.compile(rb"(?:<Contents>" + _TO_END + rb"\s*)+")
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _entity(match: re.Match[str]) -> str:
    name, decimal, hexadecimal = match.groups()
    if name:
        return _NAMED[name]
    return chr(int(decimal) if decimal else int(hexadecimal, 16))


def _texts(raws: list[bytes]) -> list[str]:
    """Return the texts of many elements as the XML parser would (entities replaced), in one go.

    Element text holds no NUL character (XML has none, nor an entity for it), so the texts are
    joined by it and split again after one decode.
    """
    if not raws:
        return []
    text = b"\x00".join(raws).decode("utf-8")
    if "&" in text:
        if len(_ENTITY.findall(text)) != text.count("&"):
            raise _Unsupported("an entity XML does not define")
        text = _ENTITY.sub(_entity, text)
    texts = text.split("\x00")
    if len(texts) != len(raws):
        raise _Unsupported("an entity of the character 0")
    return texts


_QUOTE = b"&quot;"


class KeyColumns(Sequence[dict[str, Any]]):
    """The ``<Contents>`` of one listing page read by :func:`key_list`, as parallel lists.

    As a sequence it holds the entries botocore hands out (one dictionary of ``Key``, ``Size``
    and ``ETag`` each), built on first use and kept, so that botocore's url-decoding handler
    changes them in place. :meth:`keys_and_sizes` reads the keys and sizes without building
    them: what a caller that only checks sizes needs.
    """

    __slots__ = ("_etags", "_keys", "_raw_etags", "_rows", "_sizes")

    def __init__(self, keys: list[str], sizes: list[int], raw_etags: list[bytes]) -> None:
        self._keys = keys
        self._sizes = sizes
        self._raw_etags = raw_etags
        self._etags: list[str] | None = None
        self._rows: list[dict[str, Any]] | None = None
        joined = b"".join(raw_etags)
        if not joined.isascii() or joined.count(b"&") != joined.count(_QUOTE):
            self._etags = _texts(raw_etags)  # read now: what it cannot read goes to the walker

    def keys_and_sizes(self) -> tuple[list[str], list[int]]:
        """Return the keys (as listed: url-encoded when asked) and the sizes, in page order."""
        if self._rows is None:
            return self._keys, self._sizes
        return [row["Key"] for row in self._rows], [row["Size"] for row in self._rows]

    def _entries(self) -> list[dict[str, Any]]:
        if self._rows is None:
            etags = self._etags
            if etags is None:
                text = b"\x00".join(self._raw_etags).decode("ascii").replace("&quot;", '"')
                etags = text.split("\x00") if self._raw_etags else []
            self._rows = [
                {"Key": key, "Size": size, "ETag": etag}
                for key, size, etag in zip(self._keys, self._sizes, etags, strict=True)
            ]
        return self._rows

    def __len__(self) -> int:
        return len(self._sizes)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._entries()[index]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._entries())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyColumns):
            return self._entries() == other._entries()
        return isinstance(other, list) and self._entries() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"KeyColumns({self._entries()!r})"


def key_list(body: bytes) -> tuple[KeyColumns, bytes] | None:
    """Read the ``<Contents>`` of a ``ListObjectsV2`` body without building their XML tree.

    Returns:
        The entries (``Key``, ``Size``, ``ETag``, in the body's order) and the body without
        them, or ``None`` when the body holds anything the expression does not read exactly.
    """
    if b"<![CDATA[" in body or b"\r" in body or not body.startswith((b"<?xml", b"<List")):
        return None
    if body.startswith(b"<?xml") and b"encoding" in body[: body.find(b"?>")]:
        prolog = body[: body.find(b"?>")].lower()
        if b'encoding="utf-8"' not in prolog and b"encoding='utf-8'" not in prolog:
            return None
    found = _CONTENTS.findall(body)
    if len(found) != body.count(b"<Contents>"):
        return None
    try:
        contents = KeyColumns(
            _texts([key for key, _, _ in found]),
            [int(size) for _, _, size in found],
            [etag for _, etag, _ in found],
        )
    except (_Unsupported, UnicodeDecodeError, ValueError):
        return None
    return contents, _without_contents(body, len(found))


def _without_contents(body: bytes, count: int) -> bytes:
    """Return ``body`` without its ``count`` ``<Contents>`` elements.

    S3 writes them one after another: then one cut removes them all, else an expression does.
    """
    if not count:
        return body
    start = body.find(b"<Contents>")
    end = body.rfind(b"</Contents>") + len(b"</Contents>")
    if body.count(b"</Contents><Contents>", start, end) == count - 1:
        return body[:start] + body[end:]
    return _ANY_CONTENTS.sub(b"", body)


def listed_keys(page: Mapping[str, Any], cut: int = 0) -> tuple[list[str], list[int]]:
    """Return the keys and sizes of a page listed with ``EncodingType`` given by the caller.

    botocore url-decodes the keys of a listing only when it asked for the encoding itself; a
    caller that asks decodes them here, all at once, as botocore would (``+`` is a space), then
    drops their first ``cut`` characters (the namespace's prefix).
    """
    contents = page.get("Contents", ())
    if isinstance(contents, KeyColumns):
        keys, sizes = contents.keys_and_sizes()
    else:
        keys = [entry["Key"] for entry in contents]
        sizes = [entry["Size"] for entry in contents]
    if page.get("EncodingType") == "url":
        joined = "".join(keys)
        if "%" in joined or "+" in joined:
            keys = [unquote_str(key) for key in keys]
    if cut:
        keys = [key[cut:] for key in keys]
    return keys, sizes


def _tree(body: bytes) -> Element | None:
    """Return the XML tree of a listing's body (the rest of it, with key lists), or ``None``."""
    try:
        # the configured S3 endpoint's answer; expat expands no external entity and caps
        # entity amplification
        parser = XMLParser(target=TreeBuilder(), encoding="utf-8")  # nosec B314
        parser.feed(body)
        root: Element = parser.close()
    except ParseError:
        return None
    return root


def _with_contents(parsed: dict[str, Any] | None, listed: KeyColumns) -> dict[str, Any] | None:
    """Put the ``<Contents>`` key lists read into the walk of the rest of the body.

    ``None`` when the rest still holds a ``<Contents>`` (one the expression did not remove: the
    key lists cannot be the page's).
    """
    if parsed is None or "Contents" in parsed:
        return None
    if listed:
        parsed["Contents"] = listed
    return parsed


def read_key_page(
    body: bytes, shape: Shape | None, timestamp: Callable[[str], Any]
) -> dict[str, Any] | None:
    """Read a ``200`` answer's body to ``ListObjectsV2`` as a key-listing client would parse it.

    ``Contents`` is a :class:`KeyColumns`; the rest is what botocore's walker gives. ``None``
    when the body is not a listing read exactly (an ``<Error>``, a cut body, anything the
    expression or the walker leave to botocore): the caller then asks botocore.
    """
    walker = compile_walker(shape)
    listed = key_list(body)
    if walker is None or listed is None:
        return None
    root = _tree(listed[1])
    if root is None or root.tag.rpartition("}")[2] != "ListBucketResult":
        return None
    return _with_contents(walker.walk(root, timestamp), listed[0])


# botocore's own check, a private name the stubs do not list; installed on the session by botocore.
_handle_200_error: Callable[..., None] = botocore_handlers._handle_200_error  # type: ignore[attr-defined]

_ROOT = "lakemirror_listing_root"
"""Key of the response dictionary holding the body's tree parsed by :func:`check_200_error_once`."""

_KEYS = "lakemirror_listing_keys"
"""Key of the response dictionary holding the entries :func:`key_list` read."""


def check_200_error_once(
    operation_model: OperationModel,
    response_dict: dict[str, Any],
    keys_only: bool = False,
    **kwargs: Any,
) -> None:
    """Check S3's 200 answers for errors as botocore does, keeping a listing's parsed tree.

    botocore parses every successful S3 body once to see whether it is truncated (a network
    cut: retried as a 500) or an ``<Error>`` (S3's error inside a 200), then its parser parses
    it again. For :data:`LISTED_SHAPES` this does the same check with the same XML parser and
    hands the tree to :class:`FastListingMixin`, which then skips its own parse: ~4 µs of CPU
    less per listed key. Every other answer goes to botocore's handler unchanged.

    With ``keys_only``, the ``<Contents>`` are read by :func:`key_list` where it can and the
    tree is built of the rest of the body only.
    """
    shape = operation_model.output_shape
    body = response_dict.get("body") if response_dict else None
    if (
        not response_dict
        or shape is None
        or shape.name not in LISTED_SHAPES
        or response_dict.get("status_code") != 200
        or not body
        or operation_model.has_event_stream_output
    ):
        _handle_200_error(operation_model, response_dict, **kwargs)
        return
    listed = key_list(body) if keys_only else None
    if listed is not None:
        body = listed[1]
    root = _tree(body)
    if root is None or root.tag == "Error":
        response_dict["status_code"] = 500
        return
    response_dict[_ROOT] = root
    if listed is not None:
        response_dict[_KEYS] = listed[0]


def parse_listings_once(events: Any, *, keys_only: bool = False) -> None:
    """Replace botocore's 200-error check by :func:`check_200_error_once` on one client.

    Args:
        events: The client's event emitter (``client.meta.events``): only that client changes.
        keys_only: The client's listings hold each object's key, size and ETag only (the
            module's "key lists").
    """
    events.unregister("before-parse.s3.*", _handle_200_error)
    check = partial(check_200_error_once, keys_only=True) if keys_only else check_200_error_once
    events.register_first("before-parse.s3.*", check)


class FastListingMixin:
    """Parses the bodies of :data:`LISTED_SHAPES` with a :class:`ListingWalker`.

    Mixed into a rest-xml parser class (botocore's or aiobotocore's) before it; only the
    payload step of a successful answer changes.
    """

    def _parse_payload(
        self,
        response: dict[str, Any],
        shape: Shape,
        member_shapes: dict[str, Shape],
        final_parsed: dict[str, Any],
    ) -> None:
        walker = compile_walker(shape)
        if walker is not None:
            parser: Any = self
            root = response.pop(_ROOT, None)
            listed = response.pop(_KEYS, None)
            if root is None:
                root = parser._initial_body_parse(response["body"])
            parsed = walker.walk(root, parser._timestamp_parser)
            if listed is not None:
                parsed = _with_contents(parsed, listed)
            if parsed is not None:
                final_parsed.update(parsed)
                return
        super()._parse_payload(response, shape, member_shapes, final_parsed)  # type: ignore[misc]


class FastListingParser(FastListingMixin, RestXMLParser):
    """botocore's rest-xml parser with the dedicated listing walk."""


class FastListingParserFactory(ResponseParserFactory):
    """A response parser factory handing out :class:`FastListingParser` for rest-xml."""

    def create_parser(self, protocol_name: str) -> Any:
        """Return the parser of ``protocol_name`` with this factory's defaults."""
        if protocol_name == "rest-xml":
            return FastListingParser(**vars(self)["_defaults"])
        return super().create_parser(protocol_name)


def use_fast_listing(session: Any, factory: ResponseParserFactory | None = None) -> Any:
    """Return ``session`` with its clients parsing listings through the dedicated walker.

    Args:
        session: A botocore (or aiobotocore) session; only its own clients are affected.
        factory: The parser factory to install (aiobotocore passes its asynchronous one);
            default :class:`FastListingParserFactory`. The session's current parser
            defaults (such as the timestamp parser) carry over.
    """
    current = session.get_component("response_parser_factory")
    installed = factory if factory is not None else FastListingParserFactory()
    installed.set_parser_defaults(**getattr(current, "_defaults", {}))
    session.register_component("response_parser_factory", installed)
    return session
