"""Write the generated part of the corpus: requests as boto3 sends them, framed bodies, documents.

Run ``python -m tests.fuzz.seeds`` to write them again (the files are committed; a run gives the
same bytes, except the clients' ``User-Agent`` and invocation IDs, which name the machine and the
run). boto3 and the AWS CLI sign with the corpus's key at :data:`~tests.fuzz.harness.FUZZ_NOW`;
each request is captured as it is about to be sent (the ``before-send`` event), so nothing
leaves the process.
Seeds named ``ok-*`` are inputs the target accepts, ``bad-*`` near-valid ones it refuses.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.config import Config
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha256Checksum

from tests.fuzz.harness import CORPUS, FUZZ_NOW
from tests.fuzz.targets import aws_chunked, complete_multipart, range_header
from tests.fuzz.targets.glob_input import render_glob_input
from tests.fuzz.targets.http_input import render
from tests.fuzz.targets.signed import KEY_ID, REGION, SECRET

__all__ = ["main"]

ENDPOINT = "http://127.0.0.1:8000"


class _Captured(Exception):
    def __init__(self, request: AWSPreparedRequest) -> None:
        super().__init__("captured")
        self.request = request


@contextmanager
def _frozen_clock(now: float = FUZZ_NOW) -> Iterator[None]:
    moment = datetime.datetime.fromtimestamp(now, datetime.UTC).replace(tzinfo=None)
    with (
        mock.patch("botocore.auth.get_current_datetime", lambda *a, **k: moment),
        mock.patch("botocore.auth.formatdate", lambda *a, **k: _http_date(now)),
        mock.patch("botocore.auth.time.time", lambda: now),
    ):
        yield


def _http_date(now: float) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now))


def _client(signature: str, *, virtual: bool = False, endpoint: str = ENDPOINT) -> Any:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        region_name=REGION,
        config=Config(
            signature_version=signature,
            s3={"addressing_style": "virtual" if virtual else "path"},
            retries={"max_attempts": 1},
        ),
    )

    def capture(request: AWSPreparedRequest, **_: Any) -> None:
        raise _Captured(request)

    client.meta.events.register("before-send.s3.*", capture)
    return client


def _as_input(request: AWSPreparedRequest | AWSRequest) -> bytes:
    split = urlsplit(request.url)
    target = split.path + (f"?{split.query}" if split.query else "")
    headers = [("Host", split.netloc)]
    for name, value in request.headers.items():
        headers.append((name, value.decode() if isinstance(value, bytes) else str(value)))
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    return render(request.method, target, headers, body or b"")


def _sent(call: Callable[[], object]) -> bytes:
    try:
        call()
    except _Captured as captured:
        return _as_input(captured.request)
    raise AssertionError("boto3 sent nothing")


def _presigned(url: str) -> bytes:
    split = urlsplit(url)
    return render("GET", f"{split.path}?{split.query}", [("Host", split.netloc)])


def _replace(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


DELETE = {"Objects": [{"Key": "main/a.txt"}, {"Key": "main/dir/b.csv"}], "Quiet": False}
PARTS = {
    "Parts": [
        {"PartNumber": 1, "ETag": f'"{complete_multipart.PARTS[1].md5}"'},
        {"PartNumber": 2, "ETag": f'"{complete_multipart.PARTS[2].md5}"'},
    ]
}


def sigv4() -> dict[str, bytes]:
    """Return the SigV4 seeds: boto3's header-signed and presigned requests."""
    out: dict[str, bytes] = {}
    s3 = _client("s3v4")
    tls = _client("s3v4", endpoint=ENDPOINT.replace("http:", "https:"))
    with _frozen_clock():
        out["ok-get-object"] = _sent(lambda: s3.get_object(Bucket="repo", Key="main/a b+c.txt"))
        out["ok-head-object-range"] = _sent(
            lambda: s3.head_object(Bucket="repo", Key="main/dir/b.csv", Range="bytes=0-9")
        )
        out["ok-list-objects-v2"] = _sent(
            lambda: s3.list_objects_v2(Bucket="repo", Prefix="main/dir/", Delimiter="/")
        )
        out["ok-put-object"] = _sent(
            lambda: s3.put_object(Bucket="repo", Key="main/x.csv", Body=b"a,b\n1,2\n")
        )
        # over TLS boto3 streams the body aws-chunked, its CRC32 in an unsigned trailer
        out["ok-put-object-chunked-trailer"] = _sent(
            lambda: tls.put_object(Bucket="repo", Key="main/x.csv", Body=b"a,b\n1,2\n" * 50)
        )
        out["ok-delete-objects"] = _sent(lambda: s3.delete_objects(Bucket="repo", Delete=DELETE))
        out["ok-complete-multipart"] = _sent(
            lambda: s3.complete_multipart_upload(
                Bucket="repo", Key="main/big.bin", UploadId="u1", MultipartUpload=PARTS
            )
        )
        out["ok-copy-object"] = _sent(
            lambda: s3.copy_object(Bucket="repo", Key="main/y.csv", CopySource="repo/main/x.csv")
        )
        out["ok-presigned-get"] = _presigned(
            s3.generate_presigned_url(
                "get_object", Params={"Bucket": "repo", "Key": "main/a.txt"}, ExpiresIn=3600
            )
        )
        out["ok-presigned-put"] = _presigned(
            s3.generate_presigned_url(
                "put_object", Params={"Bucket": "repo", "Key": "main/u.bin"}, ExpiresIn=600
            )
        ).replace(b"GET ", b"PUT ", 1)
    with _frozen_clock(FUZZ_NOW - 7200):
        out["bad-presigned-expired"] = _presigned(
            s3.generate_presigned_url(
                "get_object", Params={"Bucket": "repo", "Key": "main/a.txt"}, ExpiresIn=3600
            )
        )
        out["bad-skewed"] = _sent(lambda: s3.get_object(Bucket="repo", Key="main/a.txt"))
    signature = out["ok-get-object"].split(b"Signature=")[1][:64]
    out["bad-tampered-signature"] = _replace(out["ok-get-object"], signature, signature[::-1])
    out["bad-no-content-sha256"] = b"\r\n".join(
        line
        for line in out["ok-get-object"].split(b"\r\n")
        if not line.lower().startswith(b"x-amz-content-sha256")
    )
    out["bad-scope-service"] = _replace(
        out["ok-get-object"], b"/s3/aws4_request", b"/ec2/aws4_request"
    )
    out["bad-aws-example-chunked"] = render(
        "PUT",
        "/examplebucket/chunkObject.txt",
        [
            ("Host", "s3.amazonaws.com"),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                "aws4_request,SignedHeaders=content-encoding;content-length;host;"
                "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
                "x-amz-storage-class,Signature="
                "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
            ),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("Content-Encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("Content-Length", "66824"),
        ],
    )
    return out


def _signed_streaming_request() -> bytes:
    """Return a PUT signed with STREAMING-AWS4-HMAC-SHA256-PAYLOAD, its chunks signed in turn."""
    from botocore.auth import S3SigV4Auth
    from botocore.credentials import Credentials

    class StreamingPayload(S3SigV4Auth):
        def payload(self, request: AWSRequest) -> str:
            return "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"

    data = b"0123456789" * 20
    request = AWSRequest(
        method="PUT",
        url=f"{ENDPOINT}/repo/main/chunked.bin",
        headers={
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(data)),
        },
    )
    with _frozen_clock():
        StreamingPayload(Credentials(KEY_ID, SECRET), "s3", REGION).add_auth(request)
    seed = str(request.headers["Authorization"]).rpartition("Signature=")[2]
    request.data = aws_chunked.encode(data, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", [64], seed=seed)
    return _as_input(request.prepare())


def aws_cli() -> dict[str, bytes]:
    """Return requests as the AWS CLI sends them (``aws s3api``, run in this process)."""
    from awscli.clidriver import create_clidriver

    out: dict[str, bytes] = {}
    environ = {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, environ):
        body = Path(tmp) / "body.csv"
        body.write_bytes(b"a,b\n1,2\n")
        commands = {
            "ok-aws-cli-put-object": ["put-object", "--key", "main/cli.csv", "--body", str(body)],
            "ok-aws-cli-list-objects-v2": ["list-objects-v2", "--prefix", "main/"],
        }
        for name, command in commands.items():
            driver = create_clidriver()
            sent: list[bytes] = []

            def capture(request: AWSPreparedRequest, sent: list[bytes] = sent, **_: Any) -> None:
                sent.append(_as_input(request))
                raise _Captured(request)

            driver.session.register("before-send.s3", capture)
            # the CLI reports the capture as a failed call on standard error
            with _frozen_clock(), redirect_stderr(io.StringIO()):
                driver.main(["s3api", *command, "--bucket", "repo", "--endpoint-url", ENDPOINT])
            out[name] = sent[0]
    return out


def sigv2() -> dict[str, bytes]:
    """Return the SigV2 seeds: boto3's ``s3`` signer, header and presigned, both addressings."""
    out: dict[str, bytes] = {}
    s3 = _client("s3")
    virtual = _client("s3", virtual=True, endpoint="http://s3.local.lakefs.io:8000")
    with _frozen_clock():
        out["ok-get-object"] = _sent(lambda: s3.get_object(Bucket="repo", Key="main/a b+c.txt"))
        out["ok-get-object-virtual-host"] = _sent(
            lambda: virtual.get_object(Bucket="repo", Key="main/a.txt")
        )
        out["ok-put-object"] = _sent(
            lambda: s3.put_object(
                Bucket="repo", Key="main/x.csv", Body=b"a,b\n1,2\n", ContentType="text/csv"
            )
        )
        out["ok-list-objects"] = _sent(lambda: s3.list_objects(Bucket="repo", Prefix="main/"))
        out["ok-delete-objects"] = _sent(lambda: s3.delete_objects(Bucket="repo", Delete=DELETE))
        out["ok-presigned-get"] = _presigned(
            s3.generate_presigned_url(
                "get_object", Params={"Bucket": "repo", "Key": "main/a.txt"}, ExpiresIn=3600
            )
        )
    with _frozen_clock(FUZZ_NOW - 7200):
        out["bad-presigned-expired"] = _presigned(
            s3.generate_presigned_url(
                "get_object", Params={"Bucket": "repo", "Key": "main/a.txt"}, ExpiresIn=3600
            )
        )
        out["bad-skewed"] = _sent(lambda: s3.get_object(Bucket="repo", Key="main/a.txt"))
    signature = out["ok-get-object"].split(f"AWS {KEY_ID}:".encode())[1][:28]
    out["bad-tampered-signature"] = _replace(out["ok-get-object"], signature, signature[::-1])
    out["bad-no-signature"] = _replace(out["ok-get-object"], f"{KEY_ID}:".encode(), b"")
    return out


def aws_chunked_bodies() -> dict[str, bytes]:
    """Return the aws-chunked seeds: botocore's own framing, and signed chunks as AWS documents."""
    data = b"The quick brown fox jumps over the lazy dog.\n" * 40
    out: dict[str, bytes] = {}
    for name, checksum_cls, trailer in (
        ("crc32", Crc32Checksum, "x-amz-checksum-crc32"),
        ("sha256", Sha256Checksum, "x-amz-checksum-sha256"),
    ):
        wrapper = AwsChunkedWrapper(
            io.BytesIO(data), checksum_cls=checksum_cls, checksum_name=trailer, chunk_size=512
        )
        out[f"ok-botocore-unsigned-trailer-{name}"] = aws_chunked.frame(
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER", trailer, 700, len(data), wrapper.read()
        )
    signed = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    trailed = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    body = aws_chunked.encode(data, signed, [1000, 300])
    out["ok-signed"] = aws_chunked.frame(signed, None, 333, len(data), body)
    out["ok-signed-empty"] = aws_chunked.frame(
        signed, None, 1, 0, aws_chunked.encode(b"", signed, [1])
    )
    crc32c = "x-amz-checksum-crc32c"
    out["ok-signed-trailer-crc32c"] = aws_chunked.frame(
        trailed, crc32c, 100, len(data), aws_chunked.encode(data, trailed, [900], crc32c)
    )
    out["ok-unsigned-trailer-crc64nvme"] = aws_chunked.frame(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "x-amz-checksum-crc64nvme",
        4096,
        None,
        aws_chunked.encode(
            data, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", [17], "x-amz-checksum-crc64nvme"
        ),
    )
    out["bad-truncated"] = aws_chunked.frame(signed, None, 333, len(data), body[:-40])
    out["bad-tampered-chunk"] = aws_chunked.frame(
        signed, None, 333, len(data), _replace(body, b"quick", b"quack")
    )
    out["bad-data-after-the-end"] = aws_chunked.frame(signed, None, 333, None, body + b"junk")
    out["bad-wrong-length"] = aws_chunked.frame(signed, None, 333, len(data) + 1, body)
    out["bad-no-trailer-header"] = aws_chunked.frame(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER", None, 4096, None, body
    )
    return out


def delete_documents() -> dict[str, bytes]:
    """Return the DeleteObjects seeds."""
    s3 = _client("s3v4")
    with _frozen_clock():
        sent = _sent(lambda: s3.delete_objects(Bucket="repo", Delete=DELETE))
    quiet = {"Objects": [{"Key": "main/dir/c d.json"}, {"Key": "protected-prod/a.txt"}]}
    with _frozen_clock():
        sent_quiet = _sent(
            lambda: s3.delete_objects(Bucket="repo", Delete={**quiet, "Quiet": True})
        )
    return {
        "ok-boto3": sent.partition(b"\r\n\r\n")[2],
        "ok-boto3-quiet-protected": sent_quiet.partition(b"\r\n\r\n")[2],
        "ok-no-namespace-bom": b"\xef\xbb\xbf<Delete><Object><Key>main/caf\xc3\xa9</Key>"
        b"<VersionId>v1</VersionId></Object><Object><Key>main/</Key></Object></Delete>",
        "ok-bad-keys": b"<Delete><Object><Key>main/../x</Key></Object><Object><Key>nobranch"
        b"</Key></Object><Object><Key>b@d~1/x</Key></Object><Object><Key>main//x</Key>"
        b"</Object></Delete>",
        "bad-dtd": b'<!DOCTYPE d [<!ENTITY e "x">]><Delete><Object><Key>&e;</Key></Object>'
        b"</Delete>",
        "bad-no-key": b"<Delete><Object><VersionId>1</VersionId></Object></Delete>",
        "bad-empty": b"<Delete></Delete>",
        "bad-other-root": b"<DeleteObjects><Object><Key>main/a</Key></Object></DeleteObjects>",
        "bad-unclosed": b"<Delete><Object><Key>main/a</Key></Object>",
    }


def complete_documents() -> dict[str, bytes]:
    """Return the CompleteMultipartUpload seeds."""
    s3 = _client("s3v4")
    with _frozen_clock():
        sent = _sent(
            lambda: s3.complete_multipart_upload(
                Bucket="repo", Key="main/big.bin", UploadId="u1", MultipartUpload=PARTS
            )
        )
    one, two = complete_multipart.PARTS[1].md5, complete_multipart.PARTS[2].md5

    def doc(*parts: tuple[str, str]) -> bytes:
        listed = "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts
        )
        return f"<CompleteMultipartUpload>{listed}</CompleteMultipartUpload>".encode()

    return {
        "ok-boto3": sent.partition(b"\r\n\r\n")[2],
        "ok-unquoted-etags": doc(("1", one), ("2", two)),
        "ok-last-part-only": doc(("2", f'"{two}"')),
        "bad-order": doc(("2", two), ("1", one)),
        "bad-unknown-part": doc(("1", one), ("3", two)),
        "bad-small-part-first": doc(("2", two), ("3", one)),
        "bad-etag": doc(("1", two)),
        "bad-number": doc(("x", one)),
        "bad-no-parts": b"<CompleteMultipartUpload/>",
        "bad-empty": b"",
    }


def ref_expressions() -> dict[str, bytes]:
    """Return the ref expression seeds, named after what they spell."""
    good = [
        "main",
        "main~1",
        "main~",
        "main^2",
        "main^1~1",
        "main@",
        "main$",
        "feature~1",
        "v1.0",
        "v1.0~1",
        "main^0",
    ]
    bad = [
        "main@~1",
        "~1",
        "main~x",
        "main ~1",
        "main$1",
        "nosuch",
        "main~99",
        "main^3",
        "v1.0@",
        "main~1234567890123456789",
    ]
    spelled = str.maketrans({"~": "-tilde", "^": "-caret", "@": "-at", "$": "-dollar", " ": "-"})
    out = {f"ok-{ref.translate(spelled)}": ref.encode() for ref in good}
    out.update({f"bad-{ref.translate(spelled)}": ref.encode() for ref in bad})
    return out


def protection_patterns() -> dict[str, bytes]:
    """Return the branch protection seeds (lakeFS's documented patterns among them)."""
    cases = {
        "ok-literal": ("main", ["main", "mainline"]),
        "ok-star": ("release-*", ["release-1.0", "release-a/b", "pre-release"]),
        "ok-braces": ("{main,master,dev-*}", ["main", "dev-x", "develop"]),
        "ok-class": ("[abc]-[!x]?", ["a-yz", "d-yz", "a-xz"]),
        "ok-range": ("v[0-9]*", ["v1", "vx"]),
        "ok-escape": (r"\*\{x\}", ["*{x}", "a{x}"]),
        "ok-nested": ("{a,{b,c}d}*", ["a", "bdz", "ce"]),
        "bad-unclosed-class": ("[abc", ["a"]),
        "bad-unclosed-brace": ("{a,b", ["a"]),
        "bad-range": ("[a-z", ["a"]),
    }
    return {name: render_glob_input(p, names) for name, (p, names) in cases.items()}


def actions_patterns() -> dict[str, bytes]:
    """Return the actions glob seeds (Go's path.Match syntax)."""
    cases = {
        "ok-literal": ("main", ["main", "mainline"]),
        "ok-star": ("release-*", ["release-1", "release-a/b"]),
        "ok-dirs": ("feature/*/x", ["feature/a/x", "feature/a/b/x"]),
        "ok-class": ("[a-c]?[^0-9]", ["ab1", "abx", "db-"]),
        "ok-escape": (r"\*\[x\]", ["*[x]", "a[x]"]),
        "bad-unclosed": ("[abc", ["a"]),
        "bad-trailing-escape": ("main\\", ["main"]),
        "bad-reversed-range": ("[z-a]", ["b"]),
    }
    return {name: render_glob_input(p, names) for name, (p, names) in cases.items()}


ACTION = b"""name: Check schemas
description: lakeFS's example action
on:
  pre-merge:
    branches:
      - main
      - "release-*"
  pre-commit:
hooks:
  - id: check_schema
    type: webhook
    description: validate the schemas
    if: failure()
    properties:
      url: "http://svc:8080/webhooks/schema?token={{ ENV.LAKEFSACTION_TOKEN }}"
      timeout: 1m30s
      query_params:
        prefix: [public/, partners/]
      headers:
        Authorization: "Bearer {{ ENV.LAKEFSACTION_TOKEN }}"
  - id: trigger_dag
    type: airflow
    properties:
      url: http://airflow:8080
      dag_id: example_dag
      username: admin
      password: "{{ ENV.LAKEFSACTION_TOKEN }}"
      dag_conf:
        some: value
  - id: lua_check
    type: lua
    properties:
      script: |
        print(action.repository_id)
      args:
        limit: 5
"""


def action_files() -> dict[str, bytes]:
    """Return the action file seeds."""
    return {
        "ok-lakefs-example": ACTION,
        "ok-tag-event": b"name: tags\non:\n  pre-create-tag:\nhooks:\n  - id: t1\n    type: lua\n"
        b"    properties:\n      script_path: scripts/check.lua\n",
        "ok-flow-style": b'{"name": "flow", "on": {"post-commit": {"branches": ["*"]}}, "hooks": '
        b'[{"id": "w1", "type": "webhook", "properties": {"url": "http://h/x", '
        b'"timeout": "500ms"}}]}',
        "bad-no-hooks": b"name: x1\non:\n  pre-commit:\n",
        "bad-yaml-1.1-boolean-key": b"name: x1\nyes: 1\nhooks: []\n",
        "bad-duplicate-hook": b"name: dup\non: {pre-commit: }\nhooks:\n  - {id: a1, type: lua, "
        b"properties: {script: x}}\n  - {id: a1, type: lua, properties: {script: y}}\n",
        "bad-branches-on-tag": b"name: t1\non:\n  pre-create-tag:\n    branches: [main]\nhooks:\n"
        b"  - {id: a1, type: lua, properties: {script: x}}\n",
        "bad-pattern": b"name: p1\non:\n  pre-commit:\n    branches: ['[main']\nhooks:\n"
        b"  - {id: a1, type: lua, properties: {script: x}}\n",
        "bad-not-yaml": b"name: [unclosed\n",
    }


def range_headers() -> dict[str, bytes]:
    """Return the Range header seeds: boto3's, and the forms RFC 9110 allows and refuses."""
    s3 = _client("s3v4")
    with _frozen_clock():
        sent = _sent(lambda: s3.get_object(Bucket="repo", Key="main/a", Range="bytes=0-9"))
    boto3_range = next(
        line.partition(b": ")[2] for line in sent.split(b"\r\n") if line.startswith(b"Range")
    )
    cases = {
        "ok-boto3": (1000, boto3_range.decode()),
        "ok-open-ended": (1000, "bytes=500-"),
        "ok-suffix": (1000, "bytes=-100"),
        "ok-past-the-end": (1000, "bytes=900-5000"),
        "ok-several-ranges-whole-object": (1000, "bytes=0-1,5-6"),
        "ok-reversed-whole-object": (1000, "bytes=9-2"),
        "ok-not-bytes-whole-object": (1000, "items=0-1"),
        "bad-start-past-the-end": (1000, "bytes=1000-"),
        "bad-empty-object": (0, "bytes=0-0"),
        "bad-zero-suffix": (1000, "bytes=-0"),
    }
    return {name: range_header.frame(size, header) for name, (size, header) in cases.items()}


GENERATORS: dict[str, Callable[[], dict[str, bytes]]] = {
    "sigv4": lambda: {
        **sigv4(),
        **aws_cli(),
        "ok-put-object-signed-chunks": _signed_streaming_request(),
    },
    "sigv2": sigv2,
    "aws_chunked": aws_chunked_bodies,
    "delete_objects": delete_documents,
    "complete_multipart": complete_documents,
    "ref_expr": ref_expressions,
    "protection_glob": protection_patterns,
    "actions_glob": actions_patterns,
    "action_file": action_files,
    "range_header": range_headers,
}


def main() -> None:
    """Write every generated seed under :data:`~tests.fuzz.harness.CORPUS`."""
    for target, generate in GENERATORS.items():
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in generate().items():
            (folder / name).write_bytes(data)
            digest = hashlib.sha256(data).hexdigest()[:12]
            print(f"{target}/{name}: {len(data)} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
