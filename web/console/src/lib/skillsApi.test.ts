// The skills API calls as sent: routes, media types and precondition
// headers (fetch is replaced by a recorder), and errors as ApiError.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { ApiError } from "./api.ts";
import { skillsApi } from "./skillsApi.ts";

interface Sent { method: string; url: string; headers: Record<string, string>; body: unknown }
const realFetch = globalThis.fetch;
let sent: Sent[] = [];

function answer(status: number, body: unknown) {
  sent = [];
  globalThis.fetch = (async (url: string, init: RequestInit = {}) => {
    sent.push({ method: init.method ?? "GET", url, headers: (init.headers ?? {}) as Record<string, string>, body: init.body });
    return new Response(JSON.stringify(body), { status, statusText: "x" });
  }) as typeof fetch;
}

afterEach(() => {
  globalThis.fetch = realFetch;
});

test("list and get ask for every layer, the invalid ones and level 2", async () => {
  answer(200, { skills: [{ name: "a" }] });
  const l = await skillsApi.list("all", "north");
  assert.deepEqual(l.skills, [{ name: "a" }]);
  assert.equal(sent[0]?.url, "/v1/skills?scope=all&project=north&include_invalid=true");
  await skillsApi.get("a b", "");
  assert.equal(sent.at(-1)?.url, "/v1/skills/a%20b?level=2");
});

test("an upload carries its media type and precondition", async () => {
  answer(201, { skill: { name: "s", revision: "2" }, replaced: false });
  const r = await skillsApi.put("s", "", "---\nname: s\n---\n", "text/markdown", { create: true });
  assert.equal(r.skill?.revision, "2");
  assert.equal(sent[0]?.method, "PUT");
  assert.equal(sent[0]?.url, "/v1/skills/s");
  assert.equal(sent[0]?.headers["Content-Type"], "text/markdown");
  assert.equal(sent[0]?.headers["If-None-Match"], "*");
  assert.equal(sent[0]?.headers["If-Match"], undefined);
  assert.equal(sent[0]?.body, "---\nname: s\n---\n");
  await skillsApi.put("s", "p1", "x", "application/gzip", { ifMatch: "7" });
  assert.equal(sent[1]?.url, "/v1/skills/s?project=p1");
  assert.equal(sent[1]?.headers["If-Match"], '"7"');
  assert.equal(sent[1]?.headers["If-None-Match"], undefined);
});

test("delete says JSON and the revision; state is JSON", async () => {
  answer(200, { revision: "3" });
  await skillsApi.remove("s", "", "3");
  assert.equal(sent[0]?.method, "DELETE");
  assert.equal(sent[0]?.headers["Content-Type"], "application/json");
  assert.equal(sent[0]?.headers["If-Match"], '"3"');
  await skillsApi.setDisabled("sys", "p", true);
  assert.equal(sent[1]?.url, "/v1/skills/sys/state?project=p");
  assert.equal(sent[1]?.body, '{"disabled":true}');
});

test("a failed write is an ApiError with the API's message", async () => {
  answer(412, { error: { code: "FAILED_PRECONDITION", message: "skill s is not at revision 3" } });
  await assert.rejects(skillsApi.put("s", "", "x", "text/markdown", { ifMatch: "3" }), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 412);
    assert.equal(e.message, "skill s is not at revision 3");
    return true;
  });
});
