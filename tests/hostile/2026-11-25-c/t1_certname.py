"""Area 1: a stranger whose certificate's common name is NAME pairs with `plait pair --listen` (the victim's user
answers y). Writes the stranger's key/cert to DIR. usage: t1_certname.py DIR CASE   CASE: zalgo | weird | long | rsa"""
import datetime, os, sys
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
def write_identity(d, cn, key):
    """Writes a self-signed certificate with common name CN for KEY, and KEY, to D/cert.pem and D/key.pem."""
    os.makedirs(d, exist_ok=True)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn, _validate=False)])
    now = datetime.datetime(2026, 1, 1)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .sign(key, hashes.SHA256()))
    open(d + "/cert.pem", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
    open(d + "/key.pem", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))

if __name__ == "__main__":
    d, case = sys.argv[1], sys.argv[2]
    cn = {"zalgo": "Z" + "\u0301" * 3000, "weird": "B\u202e\n\x1b[31mEVIL", "long": "L" * 5000,
          "rsa": "rsa stranger"}[case]
    write_identity(d, cn, rsa.generate_private_key(65537, 2048) if case == "rsa" else ec.generate_private_key(ec.SECP256R1()))
