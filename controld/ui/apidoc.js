// apidoc — the readable API reference at /docs/api: renders /v1/openapi.json (the document the
// integration tests hold every answer to) as one page, grouped by tag. Plain DOM, text only:
// nothing from the document is parsed as HTML.

const main = document.getElementById("apidoc");

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

// Follow a local "$ref" ("#/components/…") once or more; unknown refs stay as they are.
function deref(doc, obj) {
  let seen = 0;
  while (obj && typeof obj.$ref === "string" && obj.$ref.startsWith("#/") && seen++ < 8) {
    let cur = doc;
    for (const part of obj.$ref.slice(2).split("/")) cur = cur ? cur[part] : undefined;
    if (!cur) break;
    obj = cur;
  }
  return obj;
}

function refName(schema) {
  return schema && typeof schema.$ref === "string" ? schema.$ref.split("/").pop() : null;
}

// A schema's type in a few words: "string", "integer", "array of Origin", "Site", "a | b".
function typeText(doc, schema) {
  if (!schema) return "";
  const name = refName(schema);
  if (name) return name;
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (schema.oneOf || schema.anyOf) return (schema.oneOf || schema.anyOf).map((s) => typeText(doc, s)).join(" | ");
  let t = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type || "any";
  if (schema.type === "array" || (Array.isArray(schema.type) && schema.type.includes("array")))
    t = "array of " + typeText(doc, schema.items);
  return t;
}

// The fields of an object schema as a table (name, type, required, description).
function fieldsTable(doc, schema) {
  const s = deref(doc, schema);
  if (!s || !s.properties) return el("p", {}, el("code", {}, typeText(doc, schema)));
  const req = new Set(s.required || []);
  const body = el("tbody");
  for (const [name, p] of Object.entries(s.properties)) {
    body.append(el("tr", {},
      el("td", {}, el("code", {}, name)),
      el("td", {}, el("code", {}, typeText(doc, p))),
      el("td", {}, req.has(name) ? "required" : ""),
      el("td", {}, deref(doc, p).description || "")));
  }
  const head = el("thead", {}, el("tr", {}, el("th", {}, "field"), el("th", {}, "type"), el("th", {}, ""), el("th", {}, "")));
  const name = refName(schema);
  return el("div", {}, name ? el("p", { class: "muted" }, name) : null, el("table", { class: "apidoc-table" }, head, body));
}

function operation(doc, path, method, op) {
  const id = (method + "-" + path).replace(/[^A-Za-z0-9]+/g, "-");
  const sec = el("section", { class: "card apidoc-op", id, "data-testid": "apidoc-op" });
  sec.append(el("h3", {},
    el("span", { class: "apidoc-method" }, method.toUpperCase()), " ", el("code", {}, path),
    " ", el("span", { class: "muted" }, "role: " + (op["x-cdnca-auth"] || "?"))));
  if (op.summary) sec.append(el("p", {}, op.summary));
  if (op.description) sec.append(el("p", { class: "muted" }, op.description));
  const params = (op.parameters || []).map((p) => deref(doc, p));
  if (params.length) {
    const body = el("tbody");
    for (const p of params)
      body.append(el("tr", {},
        el("td", {}, el("code", {}, p.name)), el("td", {}, p.in),
        el("td", {}, el("code", {}, typeText(doc, p.schema))),
        el("td", {}, p.required ? "required" : ""), el("td", {}, p.description || "")));
    sec.append(el("h4", {}, "Parameters"), el("table", { class: "apidoc-table" }, body));
  }
  const rb = deref(doc, op.requestBody);
  if (rb && rb.content) {
    for (const [ctype, media] of Object.entries(rb.content))
      sec.append(el("h4", {}, "Request body ", el("code", {}, ctype)), fieldsTable(doc, media.schema));
  }
  const rows = el("tbody");
  for (const [code, r0] of Object.entries(op.responses || {})) {
    const r = deref(doc, r0);
    const types = r && r.content ? Object.entries(r.content).map(([ct, m]) => ct + (m.schema ? " " + typeText(doc, m.schema) : "")).join(", ") : "";
    rows.append(el("tr", {}, el("td", {}, el("code", {}, code)), el("td", {}, (r && r.description) || ""), el("td", {}, el("code", {}, types))));
  }
  sec.append(el("h4", {}, "Answers"), el("table", { class: "apidoc-table" }, rows));
  return sec;
}

function render(doc) {
  main.replaceChildren();
  main.append(el("h1", {}, (doc.info && doc.info.title) || "API", " ", el("span", { class: "muted" }, (doc.info && doc.info.version) || "")));
  if (doc.info && doc.info.description) main.append(el("p", {}, doc.info.description));
  const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, { tag: { name: tag }, ops: [] });
      byTag.get(tag).ops.push([path, method, op]);
    }
  }
  const toc = el("ul", { class: "apidoc-toc" });
  for (const { tag, ops } of byTag.values()) {
    if (!ops.length) continue;
    const anchor = "tag-" + tag.name.replace(/[^A-Za-z0-9]+/g, "-");
    toc.append(el("li", {}, el("a", { href: "#" + anchor }, tag.name), " ", el("span", { class: "muted" }, String(ops.length))));
  }
  main.append(el("nav", { "aria-label": "Sections" }, toc));
  for (const { tag, ops } of byTag.values()) {
    if (!ops.length) continue;
    const anchor = "tag-" + tag.name.replace(/[^A-Za-z0-9]+/g, "-");
    main.append(el("h2", { id: anchor }, tag.name));
    if (tag.description) main.append(el("p", { class: "muted" }, tag.description));
    for (const [path, method, op] of ops) main.append(operation(doc, path, method, op));
  }
  if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
}

fetch("/v1/openapi.json")
  .then((r) => {
    if (!r.ok) throw new Error("GET /v1/openapi.json answered " + r.status);
    return r.json();
  })
  .then(render)
  .catch((e) => {
    main.replaceChildren(el("p", { role: "alert" }, "Cannot load the API document: " + e.message));
  });
