"""An object-store location and its options, read and checked before obstore sees them.

A location is ``s3://bucket/prefix`` (``gs://``, ``az://``/``abfs://`` alike); its
options are the keys deltalake takes (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...),
case-insensitive, and any left out come from the environment variable of that name.
Everything obstore would refuse late, or panic on (a ``PanicException`` is not an
``Exception``), is refused here with a typed error naming the option, never its value:
an unknown key, a malformed flag, an endpoint that is not an ``http(s)://`` URL, a bucket
name S3 would answer with 403, a key path with ``.``, ``..`` or ``//``. Every credential
given is registered for redaction as it is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..diagnostics.redact import redact, register_secret
from ..errors import StorageConfigError

#: URI scheme -> the store kind obstore builds for it.
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}

# deltalake's S3 keys (and object_store's own names) -> obstore's S3Store arguments.
_S3_KEYS = {
    "aws_endpoint_url": "endpoint",
    "aws_endpoint": "endpoint",
    "endpoint": "endpoint",
    "aws_access_key_id": "access_key_id",
    "access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "aws_token": "session_token",
    "session_token": "session_token",
    "aws_region": "region",
    "region": "region",
    "aws_default_region": "default_region",
    "aws_skip_signature": "skip_signature",
    "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
    "aws_unsigned_payload": "unsigned_payload",
    "aws_request_payer": "request_payer",
    "aws_sts_endpoint": "sts_endpoint",
    "aws_role_arn": "role_arn",
    "aws_web_identity_token_file": "web_identity_token_file",
    "aws_server_side_encryption": "server_side_encryption",
    "aws_sse_kms_key_id": "sse_kms_key_id",
}
_GCS_KEYS = {
    "google_service_account": "service_account",
    "google_service_account_path": "service_account_path",
    "google_service_account_key": "service_account_key",
    "google_application_credentials": "application_credentials",
}
_AZURE_KEYS = {
    "azure_storage_account_name": "account_name",
    "azure_storage_account_key": "account_key",
    "azure_storage_sas_token": "sas_key",
    "azure_storage_token": "token",
    "azure_storage_client_id": "client_id",
    "azure_storage_client_secret": "client_secret",
    "azure_storage_tenant_id": "tenant_id",
    "azure_storage_use_emulator": "use_emulator",
    "azure_storage_endpoint": "endpoint",
}
_KEYS = {"s3": _S3_KEYS, "gcs": _GCS_KEYS, "azure": _AZURE_KEYS}
# Client options every store takes (deltalake spells the first with the AWS_ prefix).
_CLIENT_KEYS = {
    "aws_allow_http": "allow_http",
    "allow_http": "allow_http",
    "timeout": "timeout",
    "connect_timeout": "connect_timeout",
    "allow_invalid_certificates": "allow_invalid_certificates",
    "aws_allow_invalid_certificates": "allow_invalid_certificates",
}
_BOOLEAN = {"allow_http", "allow_invalid_certificates", "skip_signature", "virtual_hosted_style_request"}
_BOOLEAN |= {"unsigned_payload", "use_emulator"}
#: Options that are URLs (checked before obstore sees them, see :func:`_check_url`).
_URLS = {"endpoint", "sts_endpoint"}
# Blanks, controls and what a URL never holds unescaped: obstore's URI parser refuses them.
_BAD_URL_CHARS = re.compile(r"[\s\x00-\x1f\x7f<>\"{}|\\^`]")
_SECRETS = {"secret_access_key", "session_token", "service_account_key", "account_key", "sas_key", "token"}
_SECRETS |= {"client_secret"}
#: deltalake keys that name a lock service lakeline does not need (its commits are
#: conditional puts): accepted and ignored, so a deltalake configuration works unchanged.
_IGNORED = {"aws_s3_locking_provider", "dynamo_table_name", "aws_conditional_put", "conditional_put"}


@dataclass(frozen=True)
class Location:
    """A parsed object-store URI: ``s3://bucket/prefix``."""

    scheme: str
    kind: str
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> Location:
        """Raises: StorageConfigError: a scheme lakeline does not reach, or no bucket."""
        scheme, _, rest = uri.partition("://")
        kind = SCHEMES.get(scheme.lower())
        if kind is None:
            raise StorageConfigError(
                f"lakeline cannot reach {scheme}:// locations; use a local path or s3://, gs://, az:// (abfs://)"
            )
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise StorageConfigError(f"{redact(uri)} names no bucket")
        if kind == "s3" and not _S3_BUCKET.fullmatch(bucket):
            raise StorageConfigError(
                f"{redact(uri)}: {bucket!r} is not a valid S3 bucket name (3 to 63 lowercase letters, digits, "
                "dots and hyphens, beginning and ending with a letter or digit)"
            )
        prefix = prefix.strip("/")
        _check_key_path(uri, prefix)
        return cls(scheme.lower(), kind, bucket, prefix)


#: S3's rule for bucket names (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
#: A name outside it can only be refused by the store, and S3 answers that with 403, which
#: reads as a credentials problem; checked here, it is named for what it is.
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: Characters obstore refuses in a key (it parses every path it is given): controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_key_path(uri: str, prefix: str) -> None:
    """Refuse a location prefix obstore cannot hold as a key, before anything is written.

    Object keys are literal: ``a/../b`` is not ``b`` on a store (nothing there resolves
    ``..``), and obstore refuses ``.``, ``..`` and empty segments outright, so normalizing
    would make a second spelling of one table; a clear refusal keeps one name per table.

    Raises:
        StorageConfigError: a segment ``.`` or ``..``, an empty one (``//``), or a control character.
    """
    for segment in prefix.split("/") if prefix else ():
        if segment in ("", ".", ".."):
            shown = "an empty segment (//)" if not segment else f"the segment {segment!r}"
            raise StorageConfigError(
                f"{redact(uri)}: {shown} is not allowed in an object-store location "
                "(object keys are taken literally, never resolved); spell the path without it"
            )
        if _CONTROL.search(segment):
            raise StorageConfigError(f"{redact(uri)}: an object-store location may not hold a control character")


_ENV_PREFIXES = {"s3": ("AWS_",), "gcs": ("GOOGLE_",), "azure": ("AZURE_",)}


def environment_options(kind: str) -> dict[str, str]:
    """The options of ``kind`` set in the environment (``AWS_ENDPOINT_URL``, ...): what a
    location takes for the keys its ``storage_options`` leave out, as every AWS tool does."""
    known = _KEYS[kind].keys() | _CLIENT_KEYS.keys() | _IGNORED
    return {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES[kind]) and k.lower() in known and v != ""}


def _flag(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise StorageConfigError(f"storage option {key} must be true or false, not {redact(repr(value))}")


def _check_url(key: str, url: str) -> None:
    """Refuse an endpoint obstore cannot parse: it panics on one at the first request
    (a ``PanicException``, which is not an ``Exception``, with a Rust backtrace), so the
    URL is checked here, where a typed error can still name the option.

    Raises:
        StorageConfigError: not ``http(s)://host[:port]``, or a port outside 1-65535.
    """
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as e:  # "Port out of range 0-65535", "Port could not be cast to integer value"
        raise StorageConfigError(f"storage option {key} is not a valid URL ({e}): {shown!r}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or _BAD_URL_CHARS.search(url):
        raise StorageConfigError(f"storage option {key} must be an http:// or https:// URL with a host, not {shown!r}")
    if port == 0:
        raise StorageConfigError(f"storage option {key} names port 0 in {shown!r}; a port is 1-65535")


def store_arguments(kind: str, options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """obstore's (store config, client options) for deltalake-style ``options``.

    Raises:
        StorageConfigError: an unknown key (named, never its value) or a malformed flag.
    """
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    names = _KEYS[kind]
    for key, value in (options or {}).items():
        low = str(key).strip().lower()
        if low in _IGNORED:
            continue
        if low in _CLIENT_KEYS:
            name = _CLIENT_KEYS[low]
            client[name] = _flag(key, value) if name in _BOOLEAN else str(value)
        elif low in names:
            name = names[low]
            config[name] = _flag(key, value) if name in _BOOLEAN else str(value)
            if name in _URLS:
                _check_url(key, config[name])
        else:
            raise StorageConfigError(f"unknown storage option {key!r} for a {kind} location (docs/object-storage.md)")
        if name in _SECRETS or name == "access_key_id":
            register_secret(str(value))
    return config, client


# -- credentials: where they come from, and what a newcomer must set ----------------------

#: Environment variables through which obstore finds S3 credentials lakeline does not map
#: (containers, profiles).
_S3_CREDENTIAL_ENV = ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_PROFILE")
#: Where obstore finds the EC2 instance metadata service: set, that service is meant.
METADATA_ENDPOINT = "AWS_METADATA_ENDPOINT"
#: The AWS tools' switch that turns the EC2 instance metadata service off.
METADATA_DISABLED = "AWS_EC2_METADATA_DISABLED"
_SET_CREDENTIALS = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (storage_options or the environment)"
_SET_ENDPOINT = (
    "AWS_ENDPOINT_URL (with AWS_ALLOW_HTTP=true for http://) for an S3-compatible store such as MinIO or SeaweedFS"
)


def _is_aws(endpoint: str) -> bool:
    host = (urlsplit(endpoint).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def instance_credentials(kind: str, config: Mapping[str, Any]) -> bool:
    """Whether an S3 store of ``config`` (:func:`store_arguments`'s, the environment's
    keys included) has no credentials of its own, so obstore will ask the EC2 instance
    metadata service for them: right on an EC2 instance with a role, and the only
    thing left to try where nothing is configured at all."""
    if kind != "s3" or config.get("skip_signature") is True:
        return False
    if config.get("access_key_id") or config.get("secret_access_key"):
        return False
    if config.get("role_arn") or config.get("web_identity_token_file"):
        return False
    return not any(os.environ.get(k) for k in _S3_CREDENTIAL_ENV)


def check_credentials(uri: str, kind: str, config: Mapping[str, Any]) -> None:
    """Refuse, before any request, an S3 store whose credentials cannot work, naming the
    option to set (never a value).

    Without this, obstore asked the EC2 instance metadata service (``169.254.169.254``)
    for the credentials no option gave, and its answer off EC2 (a 403, a timeout) read
    as wrong credentials. Where that service is the only source left and it may be meant
    (no endpoint: AWS itself, perhaps on EC2 with a role) the request still goes, and its
    failure is :func:`no_instance_credentials`'s error.

    Raises:
        StorageConfigError: one of the access key pair without the other; no credentials
            at all for an endpoint that is not AWS's, or with ``AWS_EC2_METADATA_DISABLED``.
    """
    if kind != "s3":
        return
    key, secret = bool(config.get("access_key_id")), bool(config.get("secret_access_key"))
    if key != secret:
        given, missing = (
            ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if key else ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")
        )
        raise StorageConfigError(
            f"{redact(uri)}: storage option {missing} is missing; {given} is given (storage_options or the "
            "environment), and S3 signs with both"
        )
    if not instance_credentials(kind, config):
        return
    endpoint = config.get("endpoint")
    if endpoint and not _is_aws(str(endpoint)) and not os.environ.get(METADATA_ENDPOINT):
        raise StorageConfigError(
            f"{redact(uri)}: no credentials for the store at {redact(str(endpoint))}: {_SET_CREDENTIALS}, or "
            "AWS_SKIP_SIGNATURE=true for a bucket open to anyone"
        )
    if _flag(METADATA_DISABLED, os.environ.get(METADATA_DISABLED) or "false"):
        raise StorageConfigError(
            f"{redact(uri)}: no credentials configured ({METADATA_DISABLED} turns off the EC2 instance "
            f"metadata service): {_SET_CREDENTIALS}" + ("" if endpoint else f"; and {_SET_ENDPOINT}")
        )


def is_instance_metadata_failure(text: str) -> bool:
    """Whether an obstore error's text is the EC2 instance metadata service failing to
    give credentials (its token or credential request), not the store answering."""
    return "/latest/api/token" in text or "/latest/meta-data/iam" in text


def no_instance_credentials(uri: str, config: Mapping[str, Any], answer: str) -> StorageConfigError:
    """The error of a store with no credentials configured whose last resort, the EC2
    instance metadata service, gave none (``answer``: what it said, redacted)."""
    endpoint = config.get("endpoint")
    where = f"the store at {redact(str(endpoint))}" if endpoint else "AWS S3 (no AWS_ENDPOINT_URL is configured)"
    return StorageConfigError(
        f"{redact(uri)}: no credentials configured for {where}: {_SET_CREDENTIALS}"
        + ("" if endpoint else f", and {_SET_ENDPOINT}")
        + f". Without them lakeline asked the EC2 instance metadata service, which gave none ({answer}); "
        f"{METADATA_DISABLED}=true skips it"
    )
