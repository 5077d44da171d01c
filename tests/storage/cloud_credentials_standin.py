"""Stand-ins for the cloud credential endpoints a test cannot reach, each speaking its service's wire format on one
loopback port, and as strict as the service is about what it is sent:

  AWS instance metadata (IMDSv2)   PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds), then
                                   GET /latest/meta-data/iam/security-credentials/[<role>] with
                                   X-aws-ec2-metadata-token;
                                   a GET without a valid session token is 401, as IMDSv2 answers.
  AWS container credentials        GET /v2/credentials/<id> with the Authorization header the container was given.
  AWS STS                          POST / Action=AssumeRoleWithWebIdentity (form), answered in STS's XML.
  Google metadata server           GET /computeMetadata/v1/instance/service-accounts/default/token, only with
                                   Metadata-Flavor: Google (else 403).
  Google OAuth token endpoint      POST /token: a service account's JWT (grant_type jwt-bearer) whose RS256 signature
                                   is verified with the key's public key and whose claims are checked; or a user's
                                   refresh token.

The test writes the configuration (a JSON file): the keys to hand out, in order, each with its lifetime
(`expires_in_s`; the last is handed out again when they run out), the role, the tokens expected, and `refuse` to have
every endpoint refuse as its service does. Every request is appended to requests.jsonl in the state directory (method,
path, headers, what was answered); the port is written to `port` once the server listens.

Usage: python cloud_credentials_standin.py STATE_DIR CONFIG_JSON"""
import base64
import datetime
import http.server
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

IMDS_TOKEN_TTL_MAX_S = 21600
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def iso8601(seconds_from_now):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StandIn:
    def __init__(self, state_dir, config):
        self.state_dir = state_dir
        self.config = config
        self.lock = threading.Lock()
        self.imds_tokens = {}  # session token -> expiry (monotonic)
        self.issued = {"aws": 0, "google": 0}

    def next_keys(self, kind):
        """The next credentials of `kind` ("aws" or "google") in the configured order, the last one repeated; an
        entry {"refuse": true} has the endpoint refuse that request as its service does."""
        with self.lock:
            handed = self.config[kind + "_keys"]
            keys = handed[min(self.issued[kind], len(handed) - 1)]
            self.issued[kind] += 1
            return keys

    def record(self, entry):
        with self.lock:
            with open(os.path.join(self.state_dir, "requests.jsonl"), "a") as log:
                log.write(json.dumps(entry) + "\n")


def make_handler(standin):
    config = standin.config

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body, content_type="text/plain", headers=(), outcome=""):
            data = body.encode() if isinstance(body, str) else body
            # Recorded before it is answered: a client that has its answer finds the request in the log.
            standin.record({"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                            "status": status, "outcome": outcome})
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def body(self):
            length = int(self.headers.get("Content-Length", "0"))
            return self.rfile.read(length).decode() if length else ""

        # --- AWS instance metadata, version 2 ---
        def imds_token(self):
            if "X-Forwarded-For" in self.headers:
                return self.answer(403, "Forbidden", outcome="forwarded")
            if config.get("refuse"):
                return self.answer(403, "Forbidden", outcome="refused")
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= IMDS_TOKEN_TTL_MAX_S:
                return self.answer(400, "Bad Request", outcome="no ttl")
            token = "imds-session-" + secrets.token_urlsafe(24)
            with standin.lock:
                standin.imds_tokens[token] = time.monotonic() + int(ttl)
            self.answer(200, token, headers=[("X-aws-ec2-metadata-token-ttl-seconds", ttl)], outcome="session token")

        def imds_session_valid(self):
            token = self.headers.get("X-aws-ec2-metadata-token", "")
            with standin.lock:
                return standin.imds_tokens.get(token, 0) > time.monotonic()

        def imds_credentials(self, role):
            if not self.imds_session_valid():
                return self.answer(401, "Unauthorized", outcome="no session token")
            if role == "":
                return self.answer(200, config["imds_role"], outcome="role listed")
            if role != config["imds_role"]:
                return self.answer(404, "Not Found", outcome="no such role")
            keys = standin.next_keys("aws")
            if keys.get("refuse"):
                return self.answer(404, "Not Found", outcome="refused")
            document = {"Code": "Success", "LastUpdated": iso8601(0), "Type": "AWS-HMAC",
                        "AccessKeyId": keys["AccessKeyId"], "SecretAccessKey": keys["SecretAccessKey"],
                        "Token": keys["Token"], "Expiration": iso8601(keys["expires_in_s"])}
            self.answer(200, json.dumps(document), "application/json", outcome="keys " + keys["AccessKeyId"])

        # --- AWS container credentials (ECS, EKS Pod Identity) ---
        def container_credentials(self):
            if config.get("refuse") or self.headers.get("Authorization", "") != config["container_authorization"]:
                message = {"code": "AccessDeniedException", "message": "the authorization token is not valid"}
                return self.answer(403, json.dumps(message), "application/json", outcome="refused")
            keys = standin.next_keys("aws")
            document = {"AccessKeyId": keys["AccessKeyId"], "SecretAccessKey": keys["SecretAccessKey"],
                        "Token": keys["Token"], "AccountId": "123456789012",
                        "Expiration": iso8601(keys["expires_in_s"])}
            self.answer(200, json.dumps(document), "application/json", outcome="keys " + keys["AccessKeyId"])

        # --- AWS STS ---
        def sts(self, form):
            def error(status, code, message):
                xml = ('<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
                       f"<Code>{code}</Code><Message>{message}</Message></Error>"
                       f"<RequestId>{secrets.token_hex(16)}</RequestId></ErrorResponse>")
                self.answer(status, xml, "text/xml", outcome=code)

            if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
                return error(400, "InvalidAction", "Could not find operation " + form.get("Action", ""))
            if config.get("refuse") or form.get("WebIdentityToken") != config["web_identity_token"]:
                return error(400, "InvalidIdentityToken",
                             "Couldn't retrieve verification key from your identity provider")
            if form.get("RoleArn") != config["role_arn"]:
                return error(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
            if not form.get("RoleSessionName"):
                return error(400, "ValidationError", "RoleSessionName is required")
            keys = standin.next_keys("aws")
            xml = ('<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                   "<AssumeRoleWithWebIdentityResult>"
                   "<SubjectFromWebIdentityToken>system:serviceaccount:profiling:podscope</SubjectFromWebIdentityToken>"
                   "<Audience>sts.amazonaws.com</Audience>"
                   f"<AssumedRoleUser><Arn>{config['role_arn']}/{form['RoleSessionName']}</Arn>"
                   "<AssumedRoleId>AROAEXAMPLE:podscope</AssumedRoleId></AssumedRoleUser>"
                   f"<Credentials><SessionToken>{keys['Token']}</SessionToken>"
                   f"<SecretAccessKey>{keys['SecretAccessKey']}</SecretAccessKey>"
                   f"<Expiration>{iso8601(keys['expires_in_s'])}</Expiration>"
                   f"<AccessKeyId>{keys['AccessKeyId']}</AccessKeyId></Credentials>"
                   "<Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.example</Provider>"
                   "</AssumeRoleWithWebIdentityResult>"
                   f"<ResponseMetadata><RequestId>{secrets.token_hex(16)}</RequestId></ResponseMetadata>"
                   "</AssumeRoleWithWebIdentityResponse>")
            self.answer(200, xml, "text/xml", outcome="keys " + keys["AccessKeyId"])

        # --- Google metadata server ---
        def google_metadata_token(self):
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.answer(403, "Missing required header: Metadata-Flavor", outcome="no flavor")
            if config.get("refuse"):
                return self.answer(404, "Not Found", outcome="refused")
            self.google_token()

        def google_token(self):
            keys = standin.next_keys("google")
            if keys.get("refuse"):
                return self.answer(503, "Service Unavailable", outcome="refused")
            document = {"access_token": keys["access_token"], "expires_in": keys["expires_in_s"],
                        "token_type": "Bearer"}
            self.answer(200, json.dumps(document), "application/json", headers=[("Metadata-Flavor", "Google")],
                        outcome="token " + keys["access_token"])

        # --- Google OAuth 2.0 token endpoint ---
        def oauth_error(self, description):
            document = {"error": "invalid_grant", "error_description": description}
            self.answer(400, json.dumps(document), "application/json", outcome=description)

        def oauth_token(self, form):
            if config.get("refuse"):
                return self.oauth_error("Invalid grant: account not found")
            if form.get("grant_type") == JWT_BEARER:
                problem = self.jwt_problem(form.get("assertion", ""))
                return self.oauth_error(problem) if problem else self.google_token()
            if form.get("grant_type") == "refresh_token":
                user = config["authorized_user"]
                if any(form.get(k) != user[k] for k in ("client_id", "client_secret", "refresh_token")):
                    return self.oauth_error("Bad Request")
                return self.google_token()
            self.oauth_error("Invalid grant_type")

        def jwt_problem(self, assertion):
            """Why Google's token endpoint would refuse this service account assertion, or None."""
            account = config["service_account"]
            parts = assertion.split(".")
            if len(parts) != 3:
                return "Invalid JWT: not three parts"
            try:
                header, claims = json.loads(b64url_decode(parts[0])), json.loads(b64url_decode(parts[1]))
                signature = b64url_decode(parts[2])
            except ValueError:
                return "Invalid JWT: not base64url JSON"
            if header.get("alg") != "RS256" or header.get("kid") != account["private_key_id"]:
                return "Invalid JWT: wrong alg or kid"
            with open(account["public_key_file"], "rb") as f:
                public_key = serialization.load_pem_public_key(f.read())
            try:
                public_key.verify(signature, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                                  hashes.SHA256())
            except InvalidSignature:
                return "Invalid JWT Signature."
            now = time.time()
            if claims.get("iss") != account["client_email"]:
                return "Invalid JWT: iss is not the service account"
            if claims.get("aud") != f"http://{self.headers.get('Host', '')}{self.path}":
                return "Invalid JWT: aud is not the token endpoint"
            if "https://www.googleapis.com/auth/devstorage.read_write" not in claims.get("scope", "").split():
                return "Invalid JWT: no Cloud Storage scope"
            iat, exp = claims.get("iat", 0), claims.get("exp", 0)
            if abs(iat - now) > 300 or exp <= iat or exp - iat > 3600:
                return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
            return None

        def do_PUT(self):
            if self.path == "/latest/api/token":
                return self.imds_token()
            self.answer(404, "Not Found", outcome="unknown")

        def do_GET(self):
            prefix = "/latest/meta-data/iam/security-credentials/"
            if self.path.startswith(prefix):
                return self.imds_credentials(urllib.parse.unquote(self.path[len(prefix):]))
            if self.path.startswith("/v2/credentials/"):
                return self.container_credentials()
            if self.path == "/computeMetadata/v1/instance/service-accounts/default/token":
                return self.google_metadata_token()
            self.answer(404, "Not Found", outcome="unknown")

        def do_POST(self):
            form = dict(urllib.parse.parse_qsl(self.body(), keep_blank_values=True))
            if self.path == "/":
                return self.sts(form)
            if self.path == "/token":
                return self.oauth_token(form)
            self.answer(404, "Not Found", outcome="unknown")

    return Handler


def main():
    state_dir, config_file = sys.argv[1], sys.argv[2]
    with open(config_file) as f:
        config = json.load(f)
    standin = StandIn(state_dir, config)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(standin))
    with open(os.path.join(state_dir, "port.tmp"), "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(os.path.join(state_dir, "port.tmp"), os.path.join(state_dir, "port"))
    server.serve_forever()


if __name__ == "__main__":
    main()
