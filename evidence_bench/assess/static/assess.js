// The assessor's keys: 0-3 grade, j/k next/previous, u undo, ? help. Every text is set with
// textContent, so nothing from the pool is ever read as HTML.
"use strict";
const GRADES = ["not relevant", "related", "relevant", "highly relevant"];
let state = null;

function show(next) {
  state = next;
  const text = (id, value) => { document.getElementById(id).textContent = value; };
  const done = next.item === null;
  text("progress", `overall ${next.judged}/${next.total} judged` +
    (done ? "" : ` · query ${next.item.query_id}: ${next.query.judged}/${next.query.total}` +
      ` · result ${next.at + 1} of ${next.total}`));
  if (done) {
    text("query-id", ""); text("query", "nothing left to judge"); text("title", "");
    text("url", ""); text("snippet", ""); text("grade", "");
    document.getElementById("page").hidden = true;
    return;
  }
  const item = next.item;
  text("query-id", item.query_id);
  text("query", item.query);
  text("title", item.title || "(no title)");
  text("url", item.url);
  text("snippet", item.snippet);
  const page = document.getElementById("page");
  page.hidden = !item.page_text;
  text("page-text", item.page_text || "");
  text("grade", item.grade === null ? "not judged yet" : `judged ${item.grade}: ${GRADES[item.grade]}`);
}

async function call(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  try {
    const response = await fetch(path, options);
    const answer = await response.json();
    if (!response.ok) { throw new Error(answer.error || response.statusText); }
    document.getElementById("status").textContent = "";
    show(answer);
  } catch (error) {
    document.getElementById("status").textContent = `not saved: ${error.message}`;
  }
}

// Keys act one after another, each on the state its predecessor's answer left: two keys
// typed faster than the server answers would otherwise both act on the same result.
let queue = call("/api/state");

function act(key) {
  if (state === null) { return undefined; }
  if (key >= "0" && key <= "3") {
    return state.item === null ? undefined : call("/api/judge", { at: state.at, grade: Number(key) });
  }
  if (key === "j") { return call(`/api/state?at=${Math.min(state.at + 1, state.total - 1)}`); }
  if (key === "k") { return call(`/api/state?at=${Math.max(state.at - 1, 0)}`); }
  return call("/api/undo", {});
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) { return; }
  const help = document.getElementById("help");
  if (!help.hidden) { help.hidden = true; event.preventDefault(); return; }
  const key = event.key;
  if (key === "?") { help.hidden = false; }
  else if ("0123jku".includes(key) && key.length === 1) { queue = queue.then(() => act(key)); }
  else { return; }
  event.preventDefault();
});
