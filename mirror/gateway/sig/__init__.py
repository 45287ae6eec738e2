"""AWS request signatures as S3 checks them: pure functions over a request's parts, no I/O.

- :mod:`.canonical`: the parts every signer shares (URI and query encoding, times, skew).
- :mod:`.v4`: Signature Version 4, in the ``Authorization`` header or a presigned URL.
- :mod:`.v2`: Signature Version 2 (``Authorization: AWS key:signature``, presigned ``Expires``).
- :mod:`.chunked`: ``aws-chunked`` bodies with chained chunk signatures and trailers.
- :mod:`.payload`: the body's digests (``x-amz-content-sha256``, ``Content-MD5``,
  ``x-amz-checksum-*``) and length, checked as it streams.
- :mod:`.checksums`: the checksum algorithms S3 accepts.
"""
