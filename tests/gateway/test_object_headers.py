"""What an object carries besides its bytes, through the gateway of a live server.

User metadata with non-ASCII values, as botocore sends it (UTF-8 bytes in the header, once its
ASCII check is off; RFC 2047 words otherwise): stored as text (the REST API's stat shows it),
answered Q-encoded as lakeFS's gateway and S3 answer it, under SigV4 and SigV2. The content
headers S3 keeps with an object (``Cache-Control``, ``Content-Disposition``,
``Content-Encoding``, ``Content-Language``, ``Expires``), beyond lakeFS: given on PutObject,
CopyObject (COPY and REPLACE), CreateMultipartUpload and through the AWS CLI, answered on GET
and HEAD, never as user metadata, and overridden by ``response-*``.
"""

from __future__ import annotations

import base64
import datetime
import email.utils
import gzip
import io
import json
import os
from email.header import decode_header, make_header
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError, ParamValidationError
from botocore.handlers import validate_ascii_metadata
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

from tests.gateway.conftest import S3ClientFactory
from tests.gateway.live import Live
from tests.gateway.test_awscli import Cli
from tests.unit.gateway_signing import sign_v4

VALUE = "café ☃"
WORD = "=?utf-8?q?caf=C3=A9_=E2=98=83?="
"""``VALUE`` as lakeFS's gateway answers it (Go's ``mime.QEncoding``, charset ``utf-8``)."""

CONTENT = {
    "CacheControl": "max-age=60, public",
    "ContentDisposition": 'attachment; filename="report.csv"',
    "ContentEncoding": "gzip",
    "ContentLanguage": "fr-CA",
}
EXPIRES = datetime.datetime(2031, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
EXPIRES_TEXT = "Thu, 02 Jan 2031 03:04:05 GMT"
STORED = {
    "Cache-Control": "max-age=60, public",
    "Content-Disposition": 'attachment; filename="report.csv"',
    "Content-Encoding": "gzip",
    "Content-Language": "fr-CA",
    "Expires": EXPIRES_TEXT,
}
"""How the REST API's stat shows ``CONTENT`` and ``EXPIRES`` in the entry's metadata."""


def stat_metadata(live: Live, repo: str, path: str, ref: str = "main") -> dict[str, str]:
    stat = live.http.get(f"/repositories/{repo}/refs/{ref}/objects/stat", params={"path": path})
    assert stat.status_code == 200, stat.text
    metadata: dict[str, str] = stat.json()["metadata"]
    return metadata


def content_of(answer: dict[str, Any]) -> dict[str, Any]:
    """Return the content headers of a HEAD or GET answer, as boto3 parsed them."""
    got = {k: answer.get(k) for k in CONTENT}
    got["Expires"] = answer.get("ExpiresString")
    return got


WANTED = {**CONTENT, "Expires": EXPIRES_TEXT}


def unchecked(s3_client: S3ClientFactory, **config: Any) -> Any:
    """Return a client whose non-ASCII metadata botocore sends (as UTF-8) instead of refusing."""
    client = s3_client(**config)
    for operation in ("PutObject", "CopyObject", "CreateMultipartUpload"):
        client.meta.events.unregister(
            f"before-parameter-build.s3.{operation}", validate_ascii_metadata
        )
    return client


@pytest.mark.parametrize("signature", ["s3v4", "s3"])
def test_non_ascii_user_metadata_round_trips(
    live: Live, s3_client: S3ClientFactory, repo: str, signature: str
) -> None:
    client = unchecked(s3_client, signature_version=signature)
    # the UTF-8 bytes of the header are what the signature covers: it verifies
    client.put_object(Bucket=repo, Key="main/m", Body=b"m", Metadata={"k": VALUE, "plain": "p"})
    assert stat_metadata(live, repo, "m") == {"X-Amz-Meta-k": VALUE, "X-Amz-Meta-plain": "p"}
    for answer in (
        client.head_object(Bucket=repo, Key="main/m"),
        client.get_object(Bucket=repo, Key="main/m"),
    ):
        assert answer["Metadata"] == {"k": WORD, "plain": "p"}
        assert str(make_header(decode_header(answer["Metadata"]["k"]))) == VALUE
    # a copy that replaces the metadata, and a multipart upload, store it the same way
    client.copy_object(
        Bucket=repo,
        Key="main/m2",
        CopySource=f"{repo}/main/m",
        MetadataDirective="REPLACE",
        Metadata={"k": VALUE + "!"},
    )
    assert stat_metadata(live, repo, "m2") == {"X-Amz-Meta-k": VALUE + "!"}
    upload = client.create_multipart_upload(Bucket=repo, Key="main/m3", Metadata={"k": VALUE})
    part = client.upload_part(
        Bucket=repo, Key="main/m3", UploadId=upload["UploadId"], PartNumber=1, Body=b"x"
    )
    client.complete_multipart_upload(
        Bucket=repo,
        Key="main/m3",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert stat_metadata(live, repo, "m3") == {"X-Amz-Meta-k": VALUE}
    assert client.head_object(Bucket=repo, Key="main/m3")["Metadata"] == {"k": WORD}


def test_metadata_sent_as_encoded_words_is_stored_as_text(live: Live, s3: Any, repo: str) -> None:
    # botocore's default refuses non-ASCII values: clients send RFC 2047 words instead
    with pytest.raises(ParamValidationError):
        s3.put_object(Bucket=repo, Key="main/w", Body=b"w", Metadata={"k": VALUE})
    long = "ünïcødé " * 12
    s3.put_object(
        Bucket=repo,
        Key="main/w",
        Body=b"w",
        Metadata={
            "b": "=?UTF-8?B?Y2Fmw6kg4piD?=",
            "q": "=?utf-8?Q?caf=C3=A9?= =?utf-8?Q?_=E2=98=83?=",
            # several words: the space between two words is not part of the value
            "long": " ".join(
                f"=?UTF-8?B?{base64.b64encode(long[i : i + 20].encode()).decode()}?="
                for i in range(0, len(long), 20)
            ),
            "bad": "=?nope?Q?x?= stays",
        },
    )
    assert stat_metadata(live, repo, "w") == {
        "X-Amz-Meta-b": VALUE,
        "X-Amz-Meta-q": VALUE,
        "X-Amz-Meta-long": long,
        "X-Amz-Meta-bad": "=?nope?Q?x?= stays",
    }
    head = s3.head_object(Bucket=repo, Key="main/w")["Metadata"]
    assert head["b"] == head["q"] == WORD
    assert str(make_header(decode_header(head["long"]))) == long
    assert head["bad"] == "=?nope?Q?x?= stays"


def test_content_headers_are_kept_with_the_object(live: Live, s3: Any, repo: str) -> None:
    body = gzip.compress(b"a,b\n1,2\n")
    s3.put_object(
        Bucket=repo,
        Key="main/c/report.csv",
        Body=body,
        ContentType="text/csv",
        Metadata={"owner": "ops"},
        Expires=EXPIRES,
        **CONTENT,
    )
    head = s3.head_object(Bucket=repo, Key="main/c/report.csv")
    got = s3.get_object(Bucket=repo, Key="main/c/report.csv")
    for answer in (head, got):
        assert content_of(answer) == WANTED
        assert answer["Expires"] == EXPIRES
        assert answer["ContentType"] == "text/csv"
        # never as user metadata
        assert answer["Metadata"] == {"owner": "ops"}
        sent = answer["ResponseMetadata"]["HTTPHeaders"]
        assert [h for h in sent if h.startswith("x-amz-meta-")] == ["x-amz-meta-owner"]
    assert got["Body"].read() == body  # as stored: the gzip coding is the client's to undo
    assert stat_metadata(live, repo, "c/report.csv") == {"X-Amz-Meta-owner": "ops", **STORED}
    # a conditional read that did not change keeps its caching headers
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=repo, Key="main/c/report.csv", IfNoneMatch=head["ETag"])
    not_modified = info.value.response["ResponseMetadata"]
    assert not_modified["HTTPStatusCode"] == 304
    assert not_modified["HTTPHeaders"]["cache-control"] == CONTENT["CacheControl"]
    assert not_modified["HTTPHeaders"]["expires"] == EXPIRES_TEXT

    # they are committed with the object, and read at the commit
    commit = live.commit(repo, message="with content headers")
    assert content_of(s3.head_object(Bucket=repo, Key=f"{commit}/c/report.csv")) == WANTED


def test_copies_keep_or_replace_content_headers(live: Live, s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/src", Body=b"s", Expires=EXPIRES, **CONTENT)
    s3.copy_object(Bucket=repo, Key="main/kept", CopySource=f"{repo}/main/src")
    assert content_of(s3.head_object(Bucket=repo, Key="main/kept")) == WANTED
    # COPY ignores the request's headers, as S3 does
    s3.copy_object(
        Bucket=repo, Key="main/kept2", CopySource=f"{repo}/main/src", CacheControl="no-store"
    )
    assert s3.head_object(Bucket=repo, Key="main/kept2")["CacheControl"] == CONTENT["CacheControl"]
    s3.copy_object(
        Bucket=repo,
        Key="main/replaced",
        CopySource=f"{repo}/main/src",
        MetadataDirective="REPLACE",
        CacheControl="no-store",
        ContentLanguage="de",
    )
    replaced = s3.head_object(Bucket=repo, Key="main/replaced")
    assert content_of(replaced) == {
        "CacheControl": "no-store",
        "ContentDisposition": None,
        "ContentEncoding": None,
        "ContentLanguage": "de",
        "Expires": None,
    }
    assert stat_metadata(live, repo, "replaced") == {
        "Cache-Control": "no-store",
        "Content-Language": "de",
    }


def test_a_multipart_upload_keeps_the_content_headers_it_was_created_with(
    s3: Any, repo: str
) -> None:
    created = s3.create_multipart_upload(
        Bucket=repo, Key="main/mpu.csv.gz", Expires=EXPIRES, **CONTENT
    )
    upload_id = created["UploadId"]
    part = s3.upload_part(
        Bucket=repo, Key="main/mpu.csv.gz", UploadId=upload_id, PartNumber=1, Body=b"p"
    )
    s3.complete_multipart_upload(
        Bucket=repo,
        Key="main/mpu.csv.gz",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    head = s3.head_object(Bucket=repo, Key="main/mpu.csv.gz")
    assert content_of(head) == WANTED and head["Metadata"] == {}


def test_response_overrides_replace_the_stored_headers(s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/o", Body=b"o", Expires=EXPIRES, **CONTENT)
    later = datetime.datetime(2040, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)
    got = s3.get_object(
        Bucket=repo,
        Key="main/o",
        ResponseCacheControl="no-cache",
        ResponseContentDisposition="inline",
        ResponseContentEncoding="identity",
        ResponseContentLanguage="de-DE",
        ResponseExpires=later,
    )
    assert content_of(got) == {
        "CacheControl": "no-cache",
        "ContentDisposition": "inline",
        "ContentEncoding": "identity",
        "ContentLanguage": "de-DE",
        "Expires": email.utils.format_datetime(later, usegmt=True),
    }
    # a value that would split the answer's headers is refused
    url = s3.generate_presigned_url(
        "get_object",
        Params={"Bucket": repo, "Key": "main/o", "ResponseCacheControl": "a\r\nx-evil: 1"},
        ExpiresIn=300,
    )
    refused = httpx.get(url)
    assert refused.status_code == 400 and b"InvalidArgument" in refused.content
    assert "x-evil" not in refused.headers


def test_an_aws_chunked_body_does_not_store_its_framing(live: Live, repo: str) -> None:
    data = b"chunked " * 100
    # framed as botocore frames a body over HTTPS, with a CRC32 trailer
    chunk = AwsChunkedWrapper(
        io.BytesIO(data), checksum_cls=Crc32Checksum, checksum_name="x-amz-checksum-crc32"
    ).read()
    url, headers = sign_v4(
        "PUT",
        f"{live.url}/{repo}/main/chunked.gz",
        body=chunk,
        headers={
            "Content-Encoding": "gzip,aws-chunked",
            "X-Amz-Decoded-Content-Length": str(len(data)),
            "X-Amz-Trailer": "x-amz-checksum-crc32",
            "Cache-Control": "no-cache",
        },
        key_id=live.key[0],
        secret=live.key[1],
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )
    done = httpx.put(url, content=chunk, headers=[h for h in headers if h[0].lower() != "host"])
    assert done.status_code == 200, done.text
    assert live.read(repo, "main", "chunked.gz") == data
    assert stat_metadata(live, repo, "chunked.gz") == {
        "Content-Encoding": "gzip",
        "Cache-Control": "no-cache",
    }


def test_the_aws_cli_sets_content_headers(
    live: Live, repo: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    aws = Cli(live, tmp_path_factory.mktemp("aws-home"))
    small = tmp_path / "page.html"
    small.write_bytes(b"<p>hi</p>")
    large = tmp_path / "large.bin"
    large.write_bytes(os.urandom(9 << 20))  # over the CLI's 8 MiB multipart threshold
    for source in (small, large):
        aws(
            "s3",
            "cp",
            source,
            f"s3://{repo}/main/cli/{source.name}",
            "--cache-control",
            "max-age=300",
            "--content-disposition",
            "inline",
            "--content-language",
            "en",
            "--expires",
            "2031-01-02T03:04:05Z",
        )
        head = json.loads(
            aws("s3api", "head-object", "--bucket", repo, "--key", f"main/cli/{source.name}")
        )
        assert head["CacheControl"] == "max-age=300", source.name
        assert head["ContentDisposition"] == "inline"
        assert head["ContentLanguage"] == "en"
        assert head["Metadata"] == {}
        assert stat_metadata(live, repo, f"cli/{source.name}")["Expires"] == EXPIRES_TEXT
