"""Test certificates made with the openssl CLI, for the TLS tests (python and C++ alike), with the extensions that
strict verification asks for (Python 3.13's default: a CA's key usage, a leaf's authority key identifier):

    python3 test_certs.py DIR      # writes them into DIR and prints nothing

Two CAs and leaf certificates (P-256 keys, fast to make):
  ca.pem                  the CA every daemon and allowed client is signed by
  other_ca.pem            a second CA: its certificates must be refused
  server.{pem,key}        the daemons' identity: SAN IP:127.0.0.1, DNS:localhost, DNS:agent.podscope.test
  server_rotated.{pem,key} the same names, another serial, valid 10 days (a rotation the expiry alert sees)
  cli.{pem,key}           SAN DNS:cli.podscope.test
  spiffe.{pem,key}        SAN URI:spiffe://podscope.test/cli
  cn_only.{pem,key}       no SAN, CN=cn-only-client
  intruder.{pem,key}      SAN DNS:intruder.podscope.test (signed by ca.pem, in no allow list)
  other_ca_cli.{pem,key}  SAN DNS:cli.podscope.test, signed by other_ca.pem
"""
import os
import subprocess
import sys

SERVER_SAN = "IP:127.0.0.1,DNS:localhost,DNS:agent.podscope.test"
# What the daemons of the tests allow: the CLI's three kinds of names and the daemons' own identity.
ALLOWED_CLIENTS = "cli.podscope.test,spiffe://podscope.test/cli,cn-only-client,agent.podscope.test"


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ca(directory, name, common_name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", os.path.join(directory, f"{name}.key"), "-out", os.path.join(directory, f"{name}.pem"),
             "-days", "30", "-subj", f"/CN={common_name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _leaf(directory, name, ca, common_name, san, serial, days=30):
    key, csr, pem = (os.path.join(directory, f"{name}.{ext}") for ext in ("key", "csr", "pem"))
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
             "-out", csr, "-subj", f"/CN={common_name}")
    extensions = os.path.join(directory, f"{name}.ext")
    with open(extensions, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        if san:
            f.write(f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", csr, "-CA", os.path.join(directory, f"{ca}.pem"),
             "-CAkey", os.path.join(directory, f"{ca}.key"), "-set_serial", str(serial), "-days", str(days),
             "-extfile", extensions, "-out", pem)
    os.remove(csr)
    os.remove(extensions)


def make_test_certs(directory):
    """Writes the certificates above into `directory`; returns {name: (cert path, key path)} and the CA paths."""
    os.makedirs(directory, exist_ok=True)
    _ca(directory, "ca", "podscope test CA")
    _ca(directory, "other_ca", "another CA")
    _leaf(directory, "server", "ca", "podscope-agent", SERVER_SAN, serial=1001)
    _leaf(directory, "server_rotated", "ca", "podscope-agent", SERVER_SAN, serial=1002, days=10)
    _leaf(directory, "cli", "ca", "cli", "DNS:cli.podscope.test", serial=2001)
    _leaf(directory, "spiffe", "ca", "spiffe-client", "URI:spiffe://podscope.test/cli", serial=2002)
    _leaf(directory, "cn_only", "ca", "cn-only-client", None, serial=2003)
    _leaf(directory, "intruder", "ca", "intruder", "DNS:intruder.podscope.test", serial=2004)
    _leaf(directory, "other_ca_cli", "other_ca", "cli", "DNS:cli.podscope.test", serial=3001)
    paths = {name: (os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}.key"))
             for name in ("server", "server_rotated", "cli", "spiffe", "cn_only", "intruder", "other_ca_cli")}
    paths["ca"] = os.path.join(directory, "ca.pem")
    paths["other_ca"] = os.path.join(directory, "other_ca.pem")
    return paths


def served_serial(address, client_cert, client_key, ca):
    """The serial (hex, as `openssl x509 -serial` prints it) of the certificate served at `address`."""
    shown = subprocess.run(
        ["openssl", "s_client", "-connect", address, "-showcerts", "-cert", client_cert, "-key", client_key,
         "-CAfile", ca], input=b"", capture_output=True, timeout=10).stdout.decode(errors="replace")
    begin = shown.find("-----BEGIN CERTIFICATE-----")
    end = shown.find("-----END CERTIFICATE-----")
    if begin < 0 or end < 0:
        return None
    pem = shown[begin:end + len("-----END CERTIFICATE-----")] + "\n"
    serial = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem.encode(), capture_output=True,
                            check=True).stdout.decode().strip()
    return serial.split("=", 1)[1]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: test_certs.py DIR")
    make_test_certs(sys.argv[1])
