"""One TLS context for every HTTP client of a process (cycle.llm.tls), its certificates read
in a thread: it trusts what httpx trusts, and an HTTPS server, a provider's or an agent's,
is still checked against it."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
from pathlib import Path

import httpcore2
import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cycle.cli import cli
from cycle.errors import ProviderConnectionError
from cycle.llm import tls
from cycle.llm.model import ModelServices, RetryPolicy
from cycle.llm.registry import get_model
from cycle.records import Message
from cycle.testing import LoopbackServer, Reply
from cycle.testing.endpoint import AgentEndpoint


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 (the file a user would trust) and a server
    context that serves it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cycle test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert_file, key_file)
    return cert_file, served


def test_every_client_shares_one_context_that_trusts_what_httpx_trusts():
    shared = tls.context()
    assert tls.context() is shared
    made_by_httpx = httpcore2.default_ssl_context()
    assert shared.get_ca_certs() == made_by_httpx.get_ca_certs()
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname


def test_a_changed_ssl_cert_file_makes_a_new_context(certificate, monkeypatch):
    cert_file, _ = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    trusted = tls.context()
    assert [c["subject"] for c in trusted.get_ca_certs()] == [
        ((("commonName", "cycle test server"),),)]
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file.parent / "missing.pem"))
    with pytest.raises(FileNotFoundError):  # what httpx raises for it, in the caller
        tls.context()


async def test_an_https_provider_is_checked_against_the_trusted_certificates(
        certificate, monkeypatch):
    cert_file, served = certificate
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with LoopbackServer(tls=served) as server:
        server.enqueue(Reply(text="over TLS"))

        async def ask() -> str:
            model = get_model("openai:gpt-4o-mini", ModelServices(),
                              options=server.openai_options(), retry=RetryPolicy(attempts=1))
            try:
                return (await model.generate([Message.user("hi")])).text
            finally:
                await model.aclose()

        with pytest.raises(ProviderConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await ask()  # a certificate nobody trusts is refused
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
        assert await ask() == "over TLS"


def test_an_https_agent_endpoint_is_checked_too(certificate, tmp_path, monkeypatch):
    cert_file, served = certificate
    endpoint = AgentEndpoint(lambda body: {"response": "Your parcel left today.", "toolCalls": []})
    endpoint.tls = served
    (tmp_path / "p.yaml").write_text("id: support\nuser_template: '{{ input }}'\n")
    (tmp_path / "cases.yaml").write_text("- id: parcel\n  input: Where is my parcel?\n")
    with endpoint:
        (tmp_path / "cycle.yaml").write_text(
            f"prompt: p.yaml\nagent: {{http: '{endpoint.url}'}}\ncases: [cases.yaml]\nrun: {{iterations: 1}}\n"
            "criteria: [{id: said, check: {type: contains, values: [parcel]}}]\n")

        def run() -> tuple[int, str]:
            r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                         str(tmp_path / "cycle.yaml"), "--json"])
            report = json.loads(Path(json.loads(r.output)["reports"]["json"]).read_text())
            return r.exit_code, str(report["cases"][0]["results"][0]["error"])

        code, error = run()
        assert code == 3 and "CERTIFICATE_VERIFY_FAILED" in error, error
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
        assert run() == (0, "None")
