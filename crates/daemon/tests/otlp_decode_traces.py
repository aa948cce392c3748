"""Decodes an OTLP ExportTraceServiceRequest (protobuf on stdin) with the official Python
bindings (PyPI opentelemetry-proto) and prints its spans as JSON: the traces test compares
them with what opentelemetry-proto's Rust types read."""
import json
import sys

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def plain(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind)


request = ExportTraceServiceRequest()
request.ParseFromString(sys.stdin.buffer.read())
out = []
for resource_spans in request.resource_spans:
    resource = {kv.key: plain(kv.value) for kv in resource_spans.resource.attributes}
    for scope_spans in resource_spans.scope_spans:
        for s in scope_spans.spans:
            out.append({
                "resource": resource,
                "scope": scope_spans.scope.name,
                "trace_id": s.trace_id.hex(),
                "span_id": s.span_id.hex(),
                "parent_span_id": s.parent_span_id.hex(),
                "name": s.name,
                "kind": s.kind,
                "start": s.start_time_unix_nano,
                "end": s.end_time_unix_nano,
                "status": {"code": s.status.code, "message": s.status.message},
                "attributes": {kv.key: plain(kv.value) for kv in s.attributes},
                "events": [e.name for e in s.events],
            })
json.dump(out, sys.stdout)
