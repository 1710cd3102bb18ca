// Conversions between JSON values and google.protobuf.Struct/Value as
// @grpc/proto-loader represents them (with `oneofs: true`).

/** JSON value -> google.protobuf.Value. */
export function toValue(v) {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  switch (typeof v) {
    case 'number':
      if (!Number.isFinite(v)) throw new Error('a JSON number must be finite');
      return { numberValue: v };
    case 'string': return { stringValue: v };
    case 'boolean': return { boolValue: v };
    case 'object':
      if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
      return { structValue: toStruct(v) };
    default:
      throw new Error(`cannot encode a ${typeof v} as JSON`);
  }
}

/** JSON object -> google.protobuf.Struct. */
export function toStruct(o) {
  const fields = {};
  for (const [k, v] of Object.entries(o)) fields[k] = toValue(v);
  return { fields };
}

/** google.protobuf.Value -> JSON value. */
export function fromValue(v) {
  switch (v?.kind) {
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'structValue': return fromStruct(v.structValue);
    case 'listValue': return (v.listValue?.values ?? []).map(fromValue);
    default: return null;
  }
}

/** google.protobuf.Struct -> JSON object. */
export function fromStruct(s) {
  const out = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = fromValue(v);
  return out;
}
