"""The exception tree, map_os_error, and "no asyncio anywhere"."""

from __future__ import annotations

import builtins
import errno
import inspect
import socket
import ssl
import subprocess
import sys
from typing import Any, Tuple, Type

import pytest

import jetstream_sync
import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.errors import (
    ConnectionLostError,
    NATSError,
    SecureConnFailedError,
    map_os_error,
)

FUNCTIONS = {"map_os_error", "api_error"}
ERROR_CLASSES = [getattr(errors, name) for name in errors.__all__ if name not in FUNCTIONS]
# nats-py's deprecated nats.aio.errors names: in jetstream_sync.errors only, for ported imports
DEPRECATED = {
    c for c in ERROR_CLASSES if (c.__doc__ or "").startswith("Deprecated: nats-py's ``nats.aio")
}
CURRENT = [c for c in ERROR_CLASSES if c not in DEPRECATED]


def test_all_lists_every_public_error_class() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
        and not name.startswith("_")
    }
    assert defined == set(errors.__all__) - FUNCTIONS


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_is_a_nats_error(cls: Type[BaseException]) -> None:
    assert issubclass(cls, NATSError)
    assert issubclass(cls, Exception)


@pytest.mark.parametrize("cls", CURRENT, ids=lambda c: c.__name__)
def test_every_error_is_exported_from_the_package(cls: Type[BaseException]) -> None:
    assert getattr(jetstream_sync, cls.__name__) is cls
    assert cls.__name__ in jetstream_sync.__all__


def test_the_deprecated_nats_aio_names_are_kept_apart() -> None:
    assert len(DEPRECATED) == 20
    assert all(not hasattr(jetstream_sync, c.__name__) for c in DEPRECATED)


def test_timeout_error_is_builtin_timeout_error() -> None:
    assert issubclass(errors.TimeoutError, builtins.TimeoutError)
    assert errors.TimeoutError is not builtins.TimeoutError
    with pytest.raises(builtins.TimeoutError):
        raise errors.TimeoutError("x")


@pytest.mark.parametrize(
    ("child", "parent"),
    [
        (errors.InvalidArgumentError, ValueError),
        (errors.BadSubjectError, errors.InvalidArgumentError),
        (errors.BadTimeoutError, errors.InvalidArgumentError),
        (errors.MaxPayloadError, errors.InvalidArgumentError),
        (errors.PermissionsError, errors.ServerError),
    ],
)
def test_subclass_relations(child: type, parent: type) -> None:
    assert issubclass(child, parent)


def test_only_documented_classes_are_value_errors() -> None:
    value_errors = {c.__name__ for c in CURRENT if issubclass(c, ValueError)}
    assert value_errors == {
        "InvalidArgumentError",
        "BadSubjectError",
        "BadTimeoutError",
        "MaxPayloadError",
        "InvalidBucketNameError",
        "InvalidObjectNameError",
        "KeyHistoryTooLargeError",
        "InvalidKeyError",
        # nats-py's names for bad input (issue 20)
        "BadHeaderError",
        "InvalidUserCredentialsError",
        "InvalidCallbackTypeError",
        "ServerNotInPoolError",
    }


def test_errors_with_extra_attributes() -> None:
    lost = errors.ConnectionLostError("gone", unconfirmed=3)
    assert (str(lost), lost.unconfirmed) == ("gone", 3)
    assert errors.ConnectionLostError("gone").unconfirmed == 0
    slow = errors.SlowConsumerError("slow", sid=4, subject="a.b", dropped=10)
    assert (str(slow), slow.sid, slow.subject, slow.dropped) == ("slow", 4, "a.b", 10)
    lost_msgs = errors.MessagesLostError("dropped", count=7)
    assert (str(lost_msgs), lost_msgs.count) == ("dropped", 7)


# --- map_os_error -------------------------------------------------------------------------


def _real_ssl_error() -> ssl.SSLError:
    """An SSLError raised by OpenSSL itself (no socket: a memory BIO fed garbage)."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="example.invalid")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    incoming.write(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)
    with pytest.raises(ssl.SSLError) as info:
        tls.do_handshake()
    return info.value


def _mapped(
    exc: BaseException, cls: Type[NATSError], where: str = "connect to nats://h:4222"
) -> Any:
    err = map_os_error(exc, where=where)
    assert type(err) is cls
    assert str(err).startswith(where + ": ")
    assert err.__cause__ is exc
    return err


def test_connection_refused() -> None:
    err = _mapped(
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        errors.ConnectionRefusedError,
    )
    assert str(err) == "connect to nats://h:4222: connection refused"
    # Both trees: ours (a ConnectionLostError) and the builtin nats-py reports.
    assert isinstance(err, ConnectionLostError)
    assert isinstance(err, builtins.ConnectionRefusedError)
    assert err.errno == errno.ECONNREFUSED


def test_generic_os_error_uses_strerror() -> None:
    err = _mapped(OSError(errno.ENETUNREACH, "Network is unreachable"), ConnectionLostError)
    assert str(err) == "connect to nats://h:4222: Network is unreachable"


def test_os_error_subclasses() -> None:
    reset = _mapped(
        ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), ConnectionLostError
    )
    assert "Connection reset by peer" in str(reset)
    pipe = _mapped(BrokenPipeError(errno.EPIPE, "Broken pipe"), ConnectionLostError)
    assert "Broken pipe" in str(pipe)


def test_os_error_without_strerror() -> None:
    assert str(_mapped(OSError("weird"), ConnectionLostError, "w")) == "w: weird"
    assert str(_mapped(OSError(), ConnectionLostError, "w")) == "w: OSError"


def test_socket_timeout() -> None:
    err = _mapped(socket.timeout("timed out"), errors.TimeoutError, "flush")
    assert str(err) == "flush: timed out"
    assert isinstance(err, builtins.TimeoutError)
    _mapped(builtins.TimeoutError(), errors.TimeoutError)


def test_ssl_error_from_openssl() -> None:
    exc = _real_ssl_error()
    err = _mapped(exc, SecureConnFailedError, "tls to h")
    assert "TLS error" in str(err)
    assert exc.reason and exc.reason in str(err)


def test_tls_failure_is_also_an_ssl_error_as_in_nats_py() -> None:
    # nats-py lets ssl.SSLError through; code ported from it catches that name.
    err = _mapped(_real_ssl_error(), SecureConnFailedError, "tls to h")
    assert isinstance(err, ssl.SSLError)
    assert isinstance(err, errors.NATSError)
    with pytest.raises(ssl.SSLError, match=r"^tls to h: TLS error"):
        raise err


def test_ssl_error_with_reason_attributes() -> None:
    exc = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    exc.reason = "WRONG_VERSION_NUMBER"
    exc.library = "SSL"
    err = _mapped(exc, SecureConnFailedError)
    assert str(err) == "connect to nats://h:4222: TLS error: WRONG_VERSION_NUMBER"


def test_ssl_cert_verification_error() -> None:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.reason = "CERTIFICATE_VERIFY_FAILED"
    exc.verify_message = "self-signed certificate"
    exc.verify_code = 18
    err = _mapped(exc, SecureConnFailedError)
    assert str(err) == (
        "connect to nats://h:4222: TLS certificate verification failed: self-signed certificate"
    )


@pytest.mark.parametrize(
    "exc",
    [ssl.SSLError("ALPN protocols must be 1 to 255 in length"), ssl.SSLCertVerificationError("x")],
    ids=["SSLError", "SSLCertVerificationError"],
)
def test_python_raised_ssl_errors(exc: ssl.SSLError) -> None:
    _mapped(exc, SecureConnFailedError)


def test_nats_errors_pass_through_unchanged() -> None:
    original = errors.ProtocolError("bad")
    assert map_os_error(original, where="x") is original
    assert original.__cause__ is None


def test_other_exceptions_become_nats_error() -> None:
    exc = KeyError("k")
    err = _mapped(exc, NATSError, "read")
    assert str(err) == "read: KeyError: 'k'"


def _eof_error() -> ssl.SSLEOFError:
    exc = ssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    exc.reason = "UNEXPECTED_EOF_WHILE_READING"  # as the _ssl module sets it
    return exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ConnectionRefusedError(), ConnectionLostError),
        (ConnectionAbortedError(), ConnectionLostError),
        (OSError(), ConnectionLostError),
        (socket.timeout(), errors.TimeoutError),
        (_eof_error(), SecureConnFailedError),
        (RuntimeError("x"), NATSError),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else type(v).__name__,
)
def test_mapping_always_returns_a_nats_error(exc: BaseException, expected: type) -> None:
    err = map_os_error(exc, where="w")
    assert isinstance(err, expected)
    assert isinstance(err, NATSError)
    assert str(err).startswith("w: ")


# --- no asyncio -----------------------------------------------------------------------------


def _run(code: str) -> Tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr


def test_no_module_imports_asyncio() -> None:
    # Not jetstream_sync.otel: opentelemetry-instrumentation, whose BaseInstrumentor it
    # extends, imports asyncio itself (opentelemetry.instrumentation.utils); nothing of ours
    # there uses it, and it is imported only by a user who switches tracing on.
    out, _ = _run(
        "import sys, pkgutil, importlib, jetstream_sync; "
        "[importlib.import_module('jetstream_sync.'+m.name) "
        "for m in pkgutil.iter_modules(jetstream_sync.__path__) "
        "if m.name not in ('testing', 'otel')]; "
        "print('asyncio' in sys.modules)"
    )
    assert out == "False"


def test_module_list_is_not_empty() -> None:
    out, _ = _run(
        "import pkgutil, jetstream_sync; "
        "print(sorted(m.name for m in pkgutil.iter_modules(jetstream_sync.__path__)))"
    )
    for name in ("_protocol", "client", "errors", "msg", "testing"):
        assert repr(name) in out


def test_testing_plugin_does_not_import_asyncio() -> None:
    # The pytest plugin imports pytest; checked separately so that a future pytest that
    # pulls in asyncio shows up here, not as a failure of the package proper. With the
    # pytest in this venv neither pytest nor the plugin imports asyncio.
    out, _ = _run(
        "import sys, pytest; before = 'asyncio' in sys.modules; "
        "import jetstream_sync.testing; print(before, 'asyncio' in sys.modules)"
    )
    if out.startswith("True"):
        pytest.skip("pytest itself imports asyncio here; the plugin cannot be checked")
    assert out == "False False"


def test_nats_py_jetstream_error_names() -> None:
    """nats.js.errors' names (issue 20) sit in the tree where both excepts work."""
    for err_code, cls in (
        (10059, nats.StreamNotFoundError),
        (10014, nats.ConsumerNotFoundError),
        (10037, nats.NoMessageFoundError),
        (99999, nats.NotFoundError),
    ):
        exc = errors.api_error(404, err_code, "gone")
        assert type(exc) is cls and isinstance(exc, nats.NotFoundError)
    # Unknown err_codes go by their HTTP-like code, as nats-py's APIError.from_error does.
    assert type(errors.api_error(400, 99999, "odd")) is nats.BadRequestError
    assert type(errors.api_error(500, 99999, "odd")) is nats.JetStreamServerError
    assert isinstance(errors.api_error(500, 99999, "odd"), nats.ServerError)
    assert type(errors.api_error(418, 99999, "odd")) is nats.APIError
    reset = errors.api_error(400, 10204, "invalid reset: below the start")
    assert type(reset) is nats.ConsumerInvalidResetError
    assert isinstance(reset, nats.BadRequestError)
    assert issubclass(nats.FetchTimeoutError, nats.TimeoutError)
    assert issubclass(nats.FetchTimeoutError, builtins.TimeoutError)
    assert nats.TooManyStalledMsgsError is nats.PublishStalledError
    assert issubclass(nats.KeyValueLimitMarkerTTLNotSupportedError, nats.KeyValueError)
    assert "reset consumer, stream 'S', consumer 'c'" in str(
        errors.api_error(400, 10204, "x", subject="$JS.API.CONSUMER.RESET.S.c")
    )


def test_nats_py_excepts_catch_what_we_raise() -> None:
    """nats-py code catches a refused write as BadRequestError and a missing key or object
    as NotFoundError: our more specific classes sit under those names."""
    for cls in (
        nats.StreamNameAlreadyInUseError,
        nats.StreamSubjectOverlapError,
        nats.StreamWrongLastSequenceError,
        nats.StreamWrongLastMsgIdError,
        nats.StreamNotMatchError,
        nats.ConsumerAlreadyExistsError,
        nats.ConsumerDoesNotExistError,
        nats.MessageTooLargeError,
        nats.PriorityGroupError,
        nats.KeyWrongLastSequenceError,
    ):
        assert issubclass(cls, nats.BadRequestError), cls
    missing = nats.KeyNotFoundError("kv 'b': key 'k' not found")
    deleted = nats.KeyDeletedError("kv 'b': key 'k' is deleted", op="DEL")
    gone = nats.ObjectNotFoundError("object store 'o': object 'x' not found")
    for exc in (missing, deleted, gone):
        assert isinstance(exc, nats.NotFoundError) and exc.code == 404
        assert "[code=" not in str(exc)  # the message stays ours: no API answer to quote
    assert str(missing) == "kv 'b': key 'k' not found" and deleted.op == "DEL"
