"""ServerURL: connected_url and servers are str as before, and read as nats-py's ParseResult."""

from __future__ import annotations

import urllib.parse

from jetstream_sync._servers import ServerURL


def test_a_server_url_is_a_str_and_reads_as_a_parse_result() -> None:
    url = ServerURL("nats://127.0.0.1:4223")
    assert url == "nats://127.0.0.1:4223" and isinstance(url, str)
    theirs = urllib.parse.urlparse("nats://127.0.0.1:4223")
    for attr in ("scheme", "hostname", "port", "netloc", "path", "username", "password"):
        assert getattr(url, attr) == getattr(theirs, attr), attr
    assert url.geturl() == theirs.geturl()


def test_ipv6_and_tls() -> None:
    url = ServerURL("tls://[::1]:4443")
    assert (url.scheme, url.hostname, url.port) == ("tls", "::1", 4443)


def test_it_stays_a_plain_value() -> None:
    url = ServerURL("nats://h:1")
    assert {url: 1}["nats://h:1"] == 1
    assert url + "/x" == "nats://h:1/x"
    assert not hasattr(url, "__dict__")
