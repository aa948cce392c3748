"""Decodes an OTLP ExportLogsServiceRequest (protobuf on stdin) with the official Python
bindings (PyPI opentelemetry-proto) and prints its records as JSON, fields named as in
AEP-0005 §3.2: the OTLP test compares them with what opentelemetry-proto's Rust types read."""
import json
import sys

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest


def plain(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind)


request = ExportLogsServiceRequest()
request.ParseFromString(sys.stdin.buffer.read())
out = []
for resource_logs in request.resource_logs:
    resource = {kv.key: plain(kv.value) for kv in resource_logs.resource.attributes}
    for scope_logs in resource_logs.scope_logs:
        for r in scope_logs.log_records:
            rec = {
                "time_unix_nano": r.time_unix_nano,
                "event_name": r.event_name,
                "severity_text": r.severity_text,
                "severity_number": r.severity_number,
                "attributes": {kv.key: plain(kv.value) for kv in r.attributes},
            }
            if r.trace_id:
                rec["trace_id"], rec["span_id"], rec["flags"] = r.trace_id.hex(), r.span_id.hex(), r.flags
            if r.HasField("body"):
                rec["body"] = plain(r.body)
            out.append({"resource": resource, "scope": scope_logs.scope.name, "record": rec})
json.dump(out, sys.stdout)
