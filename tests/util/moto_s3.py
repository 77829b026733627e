#!/usr/bin/env python3
"""An S3 server on 127.0.0.1 that checks signatures, for the S3 suite (tests/suite/s3.rs).

moto's server (moto[server]) with its IAM authentication enforced: once set up, every request
must be signed (SigV4) with the secret of an access key moto knows (an IAM user's, or an
assumed role's with its session token), or moto answers 403 SignatureDoesNotMatch /
InvalidAccessKeyId. moto's switch is INITIAL_NO_AUTH_ACTION_COUNT (the number of requests let
through unchecked); this script sets the fixtures up in that window, then closes it with
POST /moto-api/reset-auth 0.

moto cannot itself check a presigned URL (query-string auth) or serve an anonymous request
while authentication is enforced (it fails them with a 500), so a thin gate in front of it
does, with botocore's own signer, independent of the code under test:
  - a presigned request is verified (its signature recomputed from the request as received,
    its expiry checked) and, if good, passed to moto re-signed with the same key;
  - an unsigned request is passed on (re-signed with the user's key) only for the bucket
    `public` (as a bucket policy granting anonymous GetObject would), else 403 AccessDenied;
  - every request is logged (method, path, how it was signed, the access key, whether a
    session token came) and may be delayed, for the tests to look at.

Protocol: prints one JSON line (the endpoint, the user's key, two assumed-role sessions),
then reads JSON commands on stdin, one a line, answering one JSON line each:
  {"op": "put", "bucket": B, "key": K, "file": PATH}
  {"op": "presign", "bucket": B, "key": K, "expires": SECONDS}
  {"op": "log", "prefix": "/bucket/key"}     requests whose path starts with it
  {"op": "delay", "prefix": P, "seconds": S} each such request waits S first
It exits when stdin closes (the test process ended), or after WATCHDOG seconds.
"""
import hmac
import json
import os
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from urllib.parse import parse_qsl, urlencode

WATCHDOG = 45 * 60
PRIVATE, PUBLIC = "private", "public"
REGION = "us-east-1"
AUTH_PARAMS = {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
               "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}


def main():
    from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server
    import boto3
    from botocore.config import Config

    keys = {}  # access key id -> (secret, token)
    log, delays, lock = [], {}, threading.Lock()
    user = {}

    def resign(environ, host, path, query, akid):
        secret, token = keys[akid]
        headers = {"host": host}
        if environ.get("HTTP_RANGE"):
            headers["range"] = environ["HTTP_RANGE"]
        url = f"http://{host}{path}" + (f"?{query}" if query else "")
        req = AWSRequest(method=environ["REQUEST_METHOD"], url=url, headers=headers)
        S3SigV4Auth(Credentials(akid, secret, token), "s3", REGION).add_auth(req)
        for k in ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token"):
            if k in req.headers:
                environ["HTTP_" + k.upper().replace("-", "_")] = req.headers[k]
        environ["QUERY_STRING"] = query
        environ["RAW_URI"] = environ["REQUEST_URI"] = path + (f"?{query}" if query else "")

    def presigned_ok(environ, host, path, params):
        d = dict(params)
        try:
            akid, date, region, service, _ = d["X-Amz-Credential"].split("/")
            secret, token = keys[akid]
            if d.get("X-Amz-Security-Token") != token:
                return False
            when = datetime.strptime(d["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
            if when.timestamp() + int(d["X-Amz-Expires"]) < time.time():
                return False
            rest = [(k, v) for k, v in params if k not in AUTH_PARAMS]
            url = f"http://{host}{path}" + (f"?{urlencode(rest)}" if rest else "")
            req = AWSRequest(method=environ["REQUEST_METHOD"], url=url, headers={"host": host})
            req.context["timestamp"] = d["X-Amz-Date"]
            auth = S3SigV4QueryAuth(Credentials(akid, secret, token), service, region,
                                    expires=int(d["X-Amz-Expires"]))
            auth._modify_request_before_signing(req)
            canonical = auth.canonical_request(req)
            want = auth.signature(auth.string_to_sign(req, canonical), req)
            return hmac.compare_digest(want, d["X-Amz-Signature"])
        except (KeyError, ValueError):
            return False

    def deny(start_response, code, message):
        body = (f"<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{message}</Message>"
                "</Error>").encode()
        start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                          ("Content-Length", str(len(body)))])
        return [body]

    app = DomainDispatcherApplication(create_backend_app)

    def gate(environ, start_response):
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        path, _, query = raw.partition("?")
        host = environ.get("HTTP_HOST", "")
        params = parse_qsl(query, keep_blank_values=True)
        header = environ.get("HTTP_AUTHORIZATION", "")
        if header:
            kind = "header"
            akid = header.partition("Credential=")[2].partition("/")[0]
        elif "X-Amz-Signature" in dict(params):
            kind = "query"
            akid = dict(params).get("X-Amz-Credential", "").partition("/")[0]
        else:
            kind, akid = "none", ""
        entry = {"method": environ["REQUEST_METHOD"], "path": path, "query": query, "auth": kind,
                 "key": akid, "token": bool(environ.get("HTTP_X_AMZ_SECURITY_TOKEN")),
                 "range": environ.get("HTTP_RANGE")}
        with lock:
            log.append(entry)
            wait = max([s for p, s in delays.items() if path.startswith(p)], default=0)
        if wait:
            time.sleep(wait)
        if kind == "query":
            if not presigned_ok(environ, host, path, params):
                return deny(start_response, "SignatureDoesNotMatch", "presigned URL refused")
            resign(environ, host, path, urlencode([(k, v) for k, v in params if k not in AUTH_PARAMS]), akid)
        elif kind == "none" and not path.startswith(f"/moto-api/"):
            if not path.startswith(f"/{PUBLIC}/"):
                return deny(start_response, "AccessDenied", "Access Denied")
            resign(environ, host, path, query, user["id"])
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, gate, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"

    # The fixtures, in moto's unchecked window (authentication is not enforced yet).
    anon = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                aws_secret_access_key="setup")
    iam, sts = boto3.client("iam", **anon), boto3.client("sts", **anon)
    allow = json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "*", "Federated": "*"},
        "Action": ["sts:AssumeRole", "sts:AssumeRoleWithWebIdentity"]}]})
    iam.create_user(UserName="fastuntar")
    iam.put_user_policy(UserName="fastuntar", PolicyName="all", PolicyDocument=allow)
    k = iam.create_access_key(UserName="fastuntar")["AccessKey"]
    user.update(id=k["AccessKeyId"], secret=k["SecretAccessKey"])
    keys[user["id"]] = (user["secret"], None)
    role = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    iam.put_role_policy(RoleName="reader", PolicyName="read", PolicyDocument=allow)
    sessions = []
    for i in range(2):
        c = sts.assume_role(RoleArn=role, RoleSessionName=f"s{i}")["Credentials"]
        sessions.append({"id": c["AccessKeyId"], "secret": c["SecretAccessKey"],
                         "token": c["SessionToken"]})
        keys[c["AccessKeyId"]] = (c["SecretAccessKey"], c["SessionToken"])
    s3anon = boto3.client("s3", **anon)
    for b in (PRIVATE, PUBLIC):
        s3anon.create_bucket(Bucket=b)
    # From here on every request is checked.
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req, timeout=10).read()
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                      aws_access_key_id=user["id"], aws_secret_access_key=user["secret"],
                      config=Config(signature_version="s3v4"))

    print(json.dumps({"endpoint": endpoint, "region": REGION, "role": role, "user": user,
                      "sessions": sessions}), flush=True)
    threading.Timer(WATCHDOG, lambda: os._exit(3)).start()
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "put":
                with open(cmd["file"], "rb") as f:
                    s3.put_object(Bucket=cmd["bucket"], Key=cmd["key"], Body=f.read())
                out = {"ok": True}
            elif op == "presign":
                url = s3.generate_presigned_url(
                    "get_object", Params={"Bucket": cmd["bucket"], "Key": cmd["key"]},
                    ExpiresIn=cmd.get("expires", 600))
                out = {"url": url}
            elif op == "log":
                with lock:
                    out = {"requests": [e for e in log if e["path"].startswith(cmd["prefix"])]}
            elif op == "delay":
                with lock:
                    delays[cmd["prefix"]] = cmd["seconds"]
                out = {"ok": True}
            else:
                out = {"error": f"unknown op {op}"}
        except Exception as e:  # the test sees it
            out = {"error": repr(e)}
        print(json.dumps(out), flush=True)
    server.shutdown()
    os._exit(0)


if __name__ == "__main__":
    # moto logs every request on stderr: keep the suite's output for failures.
    sys.stderr = open(os.devnull, "w")
    main()
