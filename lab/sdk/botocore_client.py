"""The lab's botocore client (Debian's python3-boto3): DynamoDB GetItem and PutItem, S3
GetObject and PutObject in turn, through a gateway, with botocore's own retries (--mode:
legacy, its default, standard or adaptive) and a per-attempt timeout. Every HTTP attempt
botocore makes is recorded as a JSON line, as lab/sdk's sdkclient records the Go SDK's.

python3 botocore_client.py --base URL --name NAME --for SECONDS --workers N --timeout S --out FILE
"""

import argparse
import json
import threading
import time

import botocore.config
import botocore.session


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--name", default="botocore")
    p.add_argument("--for", dest="duration", type=float, default=10)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--timeout", type=float, default=1)
    p.add_argument("--mode", default="legacy")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    out = open(a.out, "w")
    lock = threading.Lock()
    state = threading.local()
    ops = ["GetItem", "PutItem", "GetObject", "PutObject"]
    # the record names the SDK by its retry mode: each mode has its own cap (legacy 5,
    # standard and adaptive 3)
    sdk = "botocore" if a.mode == "legacy" else "botocore-" + a.mode

    def before_send(request, **kwargs):
        h = request.headers
        inv = h.get("amz-sdk-invocation-id", b"")
        req = h.get("amz-sdk-request", b"")
        inv = inv.decode() if isinstance(inv, bytes) else inv
        req = req.decode() if isinstance(req, bytes) else req
        n = 0
        for part in req.split(";"):
            k, _, v = part.strip().partition("=")
            if k == "attempt":
                n = int(v) - 1
        state.attempt = {"sdk": sdk, "call": inv, "op": state.op, "n": n,
                         "sent": time.time_ns(), "status": 0, "invocation": inv}

    def response_received(response_dict=None, exception=None, **kwargs):
        at = getattr(state, "attempt", None)
        if at is None:
            return
        state.attempt = None
        at["end"] = time.time_ns()
        if response_dict is not None and exception is None:
            at["status"] = response_dict.get("status_code", 0)
        with lock:
            out.write(json.dumps(at) + "\n")

    deadline = time.time() + a.duration
    counter = [0]

    def worker():
        session = botocore.session.get_session()
        cfg = botocore.config.Config(retries={"mode": a.mode}, read_timeout=a.timeout, connect_timeout=a.timeout,
                                     s3={"addressing_style": "path"})
        kw = dict(region_name="us-east-1", endpoint_url=a.base, aws_access_key_id="AKIDLAB",
                  aws_secret_access_key="secret", config=cfg)
        clients = {"dynamodb": session.create_client("dynamodb", **kw), "s3": session.create_client("s3", **kw)}
        for c in clients.values():
            c.meta.events.register("before-send", before_send)
            c.meta.events.register("response-received", response_received)
        while time.time() < deadline:
            with lock:
                i = counter[0]
                counter[0] += 1
            key = "%s-%05d" % (a.name, i)
            state.op = ops[i % len(ops)]
            try:
                if state.op == "GetItem":
                    clients["dynamodb"].get_item(TableName="lab", Key={"id": {"S": key}})
                elif state.op == "PutItem":
                    clients["dynamodb"].put_item(TableName="lab", Item={"id": {"S": key}})
                elif state.op == "GetObject":
                    clients["s3"].get_object(Bucket="lab", Key=key)["Body"].read()
                else:
                    clients["s3"].put_object(Bucket="lab", Key=key, Body=b"hello")
            except Exception:
                pass  # the record says how it went

    threads = [threading.Thread(target=worker) for _ in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.close()


if __name__ == "__main__":
    main()
