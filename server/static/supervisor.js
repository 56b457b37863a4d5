// The supervisor's view: every passenger's conversations, refreshed every two seconds
// (the open one follows live: read again whenever the list says it moved), and the desk:
// the customers waiting for a person, taken, written to, proposed an action (a form from
// the tool's own argument schema, the customer's preview before sending, the customer's
// bookings searched by name to fill an id) and handed back to the assistant, and the
// large actions waiting for a staff check, each with what the
// customer said yes to, a way to open its conversation, Approve, Refuse, Edit (the
// customer is asked again) and Respond (a message; the check waits) (the only requests that change
// anything, under /supervisor/desk). The queue and the checks follow what other people do
// (taken, decided elsewhere) on the same refresh. Plain JavaScript, no build step. Text
// from the API is only ever set as textContent.
"use strict";

const TOKEN_KEY = "travel-assistant-supervisor-token";
const API = "/api/v1/supervisor";
const REFRESH_MS = 2000; // the queue and the checks are at most this old

const state = {
  token: null,
  selected: null, // conversation id
  closing: false, // the hand-back waiting for "End it and go on" is a close
  listText: "", // the last list answer, to redraw only on change
  detailText: "",
  detail: null, // the selected conversation as last read: who answers it, its version
  stale: false, // this page changed the selected conversation: read it at the next refresh
  conversations: [],
  open: new Set(), // ids of the <details> left open by the reader
  timer: null,
  me: null, // the supervisor's name: the person the customer sees
  queueText: "",
  checksText: "",
  handoffs: new Map(), // conversation id -> its open hand-off (waiting, or held by me)
  actions: null, // the actions staff can propose, each with its arguments' JSON schema
  proposeFor: null, // the conversation the propose form was built for
  proposal: null, // the form's arguments read at its last field change
  previewed: null, // {action, args} as last previewed: what Send sends
  editing: new Set(), // ids of the checks whose Edit form is open
};

const $ = (id) => document.getElementById(id);

function el(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  if (text !== null) node.textContent = text;
  return node;
}

function timeOf(iso) {
  const when = new Date(iso);
  return Number.isNaN(when.getTime()) ? iso : when.toLocaleString();
}

// --- the token -------------------------------------------------------------------------

function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) history.replaceState(null, "", location.pathname + location.search);
  return token;
}

class SignedOut extends Error {}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${state.token}` };
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await fetch(API + path, { ...options, headers });
  if (response.status === 401 || response.status === 403) {
    const problem = await readProblem(response);
    signOut(problem);
    throw new SignedOut(problem);
  }
  return response;
}

async function readProblem(response) {
  try {
    const body = await response.json();
    if (typeof body.detail === "string") return body.detail;
  } catch (_) {
    // not JSON
  }
  return `The service answered ${response.status}.`;
}

async function signIn(token) {
  state.token = token;
  let me;
  try {
    const response = await api("/me");
    if (!response.ok) throw new Error(await readProblem(response));
    me = await response.json();
  } catch (error) {
    if (!(error instanceof SignedOut)) signOut("The service cannot be reached; try again.");
    return false;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  state.me = me.name;
  state.role = me.role;
  $("who-text").textContent = `${me.role === "agent" ? "Agent" : "Supervisor"} ${me.name}`;
  $("who").hidden = false;
  $("sign-in").hidden = true;
  $("desk").hidden = false;
  const wanted = new URLSearchParams(location.search).get("conversation");
  if (wanted) {
    state.selected = wanted;
    $("desk").dataset.view = "detail"; // a link to a conversation opens it, on a phone too
  }
  await refresh();
  $("desk").focus();
  return true;
}

function signOut(message = "") {
  clearTimeout(state.timer);
  state.token = null;
  state.selected = null;
  state.listText = "";
  state.detailText = "";
  state.detail = null;
  state.stale = false;
  state.queueText = "";
  state.checksText = "";
  state.handoffs = new Map();
  state.actions = null;
  state.proposeFor = null;
  state.previewed = null;
  state.editing = new Set();
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").hidden = true;
  $("desk").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message;
  $("token-input").value = "";
  $("token-input").focus();
}

// --- refreshing --------------------------------------------------------------------------

async function refresh() {
  clearTimeout(state.timer);
  try {
    await loadQueue();
    await loadList();
    if (state.selected && detailMoved()) await loadDetail();
    $("list-status").textContent = `Live: updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    if (error instanceof SignedOut) return;
    $("list-status").textContent = "Cannot reach the service; trying again…";
  }
  state.timer = setTimeout(refresh, REFRESH_MS);
}

// The open conversation follows live from the list, read anyway: it is read again only
// when its version there moved (a message or a turn's step saved, a decision, a check,
// who holds it), or when the list does not have it (beyond its length, or deleted).
function detailMoved() {
  const shown = state.detail && state.detail.conversation;
  if (state.stale || !shown || shown.conversation_id !== state.selected) return true;
  const listed = state.conversations.find((c) => c.conversation_id === state.selected);
  return !listed || listed.version !== shown.version;
}

async function loadList() {
  const response = await api("/conversations");
  if (!response.ok) throw new Error(await readProblem(response));
  const text = await response.text();
  if (text === state.listText) return;
  state.listText = text;
  state.conversations = JSON.parse(text).conversations;
  drawList();
}

function drawList() {
  const list = $("conversation-list");
  const words = $("filter").value.trim().toLowerCase();
  const shown = state.conversations.filter(
    (c) => !words || `${c.passenger_id} ${c.title} ${c.conversation_id}`.toLowerCase().includes(words),
  );
  list.replaceChildren(
    ...shown.map((c) => {
      const button = el("button", { type: "button", class: "conversation", "data-id": c.conversation_id });
      if (c.conversation_id === state.selected) button.setAttribute("aria-current", "true");
      button.append(
        el("span", { class: "who-line" }, `Passenger ${c.passenger_id}`),
        el("span", { class: "title" }, c.title || "(no message yet)"),
      );
      const badges = el("span", { class: "badges" });
      badges.append(answersBadge(c));
      if (c.pending_actions) {
        badges.append(el("span", { class: "badge waiting" }, `${c.pending_actions} waiting`));
      }
      if (c.busy) badges.append(el("span", { class: "badge busy" }, "answering now"));
      button.append(badges, el("span", { class: "when" }, `Last used ${timeOf(c.updated_at)}`));
      button.addEventListener("click", () => select(c.conversation_id));
      return el("li", {}, null).appendChild(button).parentNode;
    }),
  );
  $("list-empty").hidden = state.conversations.length > 0;
}

// Who answers the customer: the assistant at work, or the queue, or the person holding it.
function answersBadge(c) {
  if (c.answers === "assistant") return el("span", { class: "badge agent" }, c.assistant_title);
  return el("span", { class: `badge ${c.answers === "waiting" ? "waiting" : "person"}` }, c.answers_text);
}

async function select(id) {
  state.selected = id;
  state.detailText = "";
  history.replaceState(null, "", `${location.pathname}?conversation=${encodeURIComponent(id)}`);
  for (const button of document.querySelectorAll(".conversation")) {
    if (button.dataset.id === id) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
  $("desk").dataset.view = "detail";
  try {
    await loadDetail();
  } catch (error) {
    if (!(error instanceof SignedOut)) $("detail-error").textContent = "Cannot reach the service; trying again…";
  }
  $("detail-heading").focus();
}

async function loadDetail() {
  const id = state.selected;
  const response = await api(`/conversations/${encodeURIComponent(id)}`);
  if (id !== state.selected) return;
  if (response.status === 404) {
    $("detail-error").textContent = await readProblem(response);
    $("detail-body").hidden = true;
    return;
  }
  if (!response.ok) throw new Error(await readProblem(response));
  state.stale = false;
  $("detail-error").textContent = "";
  const text = await response.text();
  if (text === state.detailText) return;
  state.detailText = text;
  drawDetail(JSON.parse(text));
}

// --- one conversation --------------------------------------------------------------------

function drawDetail(detail) {
  state.detail = detail;
  const c = detail.conversation;
  $("detail-heading").textContent = c.title || "(no message yet)";
  $("detail-hint").hidden = true;
  $("detail-body").hidden = false;

  const facts = [
    ["Passenger", c.passenger_id],
    ["Conversation", c.conversation_id],
    ["Who answers", c.answers_text],
    ["State", c.busy ? "answering now" : "idle"],
    ["Customer messages", String(c.turns)],
    ["Charged", detail.money.charged],
    ["Refunded", detail.money.refunded],
    ["Waiting for a decision", String(detail.pending.length)],
    ["Errors", String(detail.errors.length)],
    ["Last used", timeOf(c.updated_at)],
  ];
  $("facts").replaceChildren(
    ...facts.map(([name, value]) => {
      const row = el("div", { class: "fact" });
      row.append(el("dt", {}, name), el("dd", {}, value));
      return row;
    }),
  );

  $("crew").replaceChildren(
    ...detail.assistants.map((a) => {
      const item = el("li", { class: a.active ? "active" : "" }, a.title);
      // While a person has the conversation (or will), no assistant answers next.
      if (a.active && c.answers === "assistant") item.append(el("span", { class: "badge agent" }, "answers next"));
      return item;
    }),
  );

  $("pending-section").hidden = detail.pending.length === 0;
  const titles = new Map(detail.assistants.map((a) => [a.name, a.title]));
  $("pending").replaceChildren(...detail.pending.map((action) => pendingCard(action, titles)));

  $("errors-section").hidden = detail.errors.length === 0;
  $("errors").replaceChildren(
    ...detail.errors.map((e) => {
      const item = el("li", { class: "error-item" });
      const where = e.source === "tool" ? "Tool" : `Turn (${e.kind})`;
      item.append(el("strong", {}, `${where}: `), document.createTextNode(e.text));
      if (e.at) item.append(el("span", { class: "when" }, ` ${timeOf(e.at)}`));
      if (e.detail) item.append(collapsible("Detail", e.detail, `error-${e.kind}-${e.at}-${e.text}`));
      return item;
    }),
  );

  drawTimeline(detail.steps);
  drawPerson();
}

function amountLine(text, kind) {
  return el("p", { class: `amount ${kind === "refund" ? "refund" : "pay"}` }, text);
}

function previewLines(lines, amount) {
  const shown = amount ? lines.slice(0, -1) : lines;
  const list = el("ul", { class: "preview-lines" });
  list.append(...shown.map((line) => el("li", {}, line)));
  return list;
}

function pendingCard(action, titles) {
  const card = el("article", { class: "card pending-card", "aria-label": `Waiting: ${action.preview.title}` });
  card.append(el("h4", {}, action.preview.title));
  const asker = titles.get(action.assistant) || action.assistant;
  // Where it stands, in one state: the customer's to decide, or approved and checked.
  card.append(el("p", { class: "state" }, pendingState(action)));
  card.append(el("p", { class: "muted" }, `Asked by the ${asker}; shown to the customer:`));
  if (action.preview.error) {
    card.append(el("p", { class: "refused" }, `Cannot be done: ${action.preview.error}`));
  } else {
    card.append(previewLines(action.preview.lines, action.preview.amount));
    if (action.preview.amount) card.append(amountLine(action.preview.amount, action.preview.amount_kind));
  }
  return card;
}

function pendingState(action) {
  if (!action.check) return "Waiting for the customer's decision";
  if (action.check.status === "waiting") return "The customer approved it; waiting for a staff check";
  const decided = action.check.status === "approved" ? "approved" : "refused";
  return `The customer approved it; ${action.check.staff} ${decided} it, being applied`;
}

const OUTCOMES = {
  approved: "approved, done",
  failed: "approved, failed",
  declined: "declined",
  refused: "not possible",
  not_done: "not done",
};

function stepItem(step) {
  const item = el("li", { class: `step step-${step.type}` });
  const head = el("p", { class: "step-head" });
  item.append(head);
  if (step.type === "customer") {
    head.append(el("span", { class: "kind" }, "Customer"));
    item.append(el("p", { class: "text" }, step.text));
  } else if (step.type === "reply") {
    const by = step.person ? `${step.person} (customer service)` : step.assistant_title;
    head.append(el("span", { class: "kind" }, step.person ? "Person" : "Reply"), el("span", { class: "by" }, by));
    item.append(el("p", { class: "text" }, step.text));
  } else if (step.type === "notice") {
    head.append(el("span", { class: "kind" }, "Notice"));
    item.append(el("p", { class: "text" }, step.text));
  } else if (step.type === "hand_over") {
    head.append(el("span", { class: "kind" }, "Hand-over"), el("span", { class: "by" }, step.tool));
    item.append(el("p", { class: "text" }, `${step.from_title} → ${step.to_title}`));
  } else if (step.type === "tool_call") {
    const outcome = step.outcome === null ? "waiting for approval" : step.outcome;
    const tone = step.outcome === "ok" ? "ok" : step.outcome === null ? "waiting" : "bad";
    head.append(
      el("span", { class: "kind" }, "Tool call"),
      el("code", { class: "tool" }, step.tool),
      el("span", { class: "by" }, step.assistant_title),
      el("span", { class: `badge ${tone}` }, outcome),
    );
    item.append(collapsible("Arguments", JSON.stringify(step.arguments, null, 2), `args-${step.tool_call_id}`, true));
    if (step.result !== null) item.append(collapsible("Result", pretty(step.result), `result-${step.tool_call_id}`));
  } else if (step.type === "approval") {
    const tone = step.outcome === "approved" ? "ok" : step.outcome === "declined" ? "waiting" : "bad";
    head.append(
      el("span", { class: "kind" }, "Approval"),
      el("span", { class: "title" }, step.title),
      el("span", { class: `badge ${tone}` }, OUTCOMES[step.outcome] || step.outcome),
    );
    if (step.checked_by) item.append(el("p", { class: "muted" }, `Checked by ${step.checked_by} (second approval)`));
    if (step.lines.length) {
      item.append(el("p", { class: "muted" }, "Shown to the customer:"));
      item.append(previewLines(step.lines, step.amount));
      if (step.amount) {
        const amount = amountLine(step.amount, step.amount_kind);
        amount.append(el("span", { class: "moved" }, step.moved ? (step.amount_kind === "refund" ? " refunded" : " charged") : " not moved"));
        item.append(amount);
      }
    }
    if (step.reason) item.append(el("p", { class: "text" }, `Reason: ${step.reason}`));
    if (step.result) item.append(el("p", { class: "text" }, `Result: ${step.result}`));
    if (step.recovered) item.append(el("p", { class: "muted" }, "Done before an interruption; reported, not asked again."));
  }
  return item;
}

function drawTimeline(steps) {
  const turns = [];
  for (const step of steps) {
    if (step.type === "customer" || turns.length === 0) turns.push([]);
    turns[turns.length - 1].push(step);
  }
  $("timeline").replaceChildren(
    ...turns.map((turnSteps, index) => {
      const turn = el("li", { class: "turn" });
      turn.append(el("h4", {}, `Turn ${index + 1}`));
      const list = el("ol", { class: "steps" });
      list.append(...turnSteps.map(stepItem));
      turn.append(list);
      return turn;
    }),
  );
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return text;
  }
}

function collapsible(title, text, key, openByDefault = false) {
  const box = el("details", { class: "raw" });
  box.open = state.open.has(key) || (openByDefault && !state.open.has(`closed:${key}`));
  box.append(el("summary", {}, title), el("pre", { tabindex: "0" }, text));
  box.addEventListener("toggle", () => {
    if (box.open) {
      state.open.add(key);
      state.open.delete(`closed:${key}`);
    } else {
      state.open.delete(key);
      state.open.add(`closed:${key}`);
    }
  });
  return box;
}

// --- the desk: customers waiting for a person --------------------------------------------

async function loadQueue() {
  // An agent's token is refused the checks (403 would sign the page out): it does not ask.
  const [response, checks] = await Promise.all([
    api("/desk/queue"),
    state.role === "agent" ? null : api("/desk/checks"),
  ]);
  if (!response.ok) throw new Error(await readProblem(response));
  await loadActions();
  if (checks && checks.ok) drawChecks(await checks.text());
  const text = await response.text();
  if (text === state.queueText) return;
  state.queueText = text;
  const { waiting, yours } = JSON.parse(text);
  state.handoffs = new Map([...waiting, ...yours].map((h) => [h.conversation_id, h]));
  $("queue").replaceChildren(...waiting.map((h) => queueEntry(h)));
  $("queue-empty").hidden = waiting.length > 0;
  $("yours").replaceChildren(...yours.map((h) => queueEntry(h)));
  $("yours-heading").hidden = yours.length === 0;
  drawPerson();
}

// Second approvals: large actions customers approved, each decided once by a person. A
// check decided elsewhere leaves the list at the next refresh; a reason being typed into
// one still there stays, and so does the focus.
function drawChecks(text) {
  if (text === state.checksText) return;
  state.checksText = text;
  const { checks } = JSON.parse(text);
  const typed = new Map([...$("checks").querySelectorAll("input")].map((input) => [input.id, input.value]));
  const focused = document.activeElement && $("checks").contains(document.activeElement) ? document.activeElement.id : "";
  $("checks-heading").hidden = checks.length === 0;
  $("checks").replaceChildren(...checks.map((check) => checkEntry(check)));
  for (const [id, value] of typed) {
    const input = document.getElementById(id);
    if (input) input.value = value;
  }
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
}

function checkEntry(check) {
  const item = el("li", { class: "check" });
  const label = `${check.title}, ${check.amount}`;
  item.append(el("span", { class: "who-line" }, `Passenger ${check.passenger_id}`));
  item.append(el("span", { class: "title" }, label));
  // What the customer said yes to; its last line, the amount, is in the title already.
  const lines = check.lines || [];
  if (lines.length) item.append(previewLines(lines, lines[lines.length - 1] === check.amount));
  const proposer = check.proposed_by ? `Proposed by ${check.proposed_by}` : "Proposed by the assistant";
  item.append(el("span", { class: "who-proposed" }, `${proposer}; the customer approved it at ${timeOf(check.asked_at)}`));
  const open = el(
    "button",
    { type: "button", class: "secondary open", "aria-label": `Open the conversation: ${label}, passenger ${check.passenger_id}` },
    "Open the conversation",
  );
  open.addEventListener("click", () => select(check.conversation_id));
  item.append(open);
  if (check.yours) {
    // Four eyes: nobody is offered their own proposal to decide.
    item.append(el("p", { class: "yours" }, "You proposed it: waiting for another supervisor."));
    return item;
  }
  const reasonId = `check-reason-${check.check_id}`;
  item.append(el("label", { for: reasonId }, "Reason, if you refuse (the customer and the assistant read it)"));
  const reason = el("input", { id: reasonId, type: "text", maxlength: "2000", autocomplete: "off" });
  item.append(reason);
  const buttons = el("div", { class: "buttons" });
  const approve = el("button", { type: "button", "aria-label": `Approve ${label}` }, "Approve");
  const refuse = el("button", { type: "button", class: "secondary", "aria-label": `Refuse ${label}` }, "Refuse");
  approve.addEventListener("click", () => decideCheck(check, true, ""));
  refuse.addEventListener("click", () => {
    if (!reason.value.trim()) {
      $("checks-error").textContent = "Say why you refuse: the customer and the assistant are told.";
      reason.focus();
      return;
    }
    decideCheck(check, false, reason.value.trim());
  });
  buttons.append(approve, refuse);
  const action = (state.actions || []).find((a) => a.name === check.tool);
  if (action && check.args) {
    const edit = el("button", { type: "button", class: "secondary", "aria-expanded": "false", "aria-label": `Edit ${label}` }, "Edit");
    buttons.append(edit);
    item.append(buttons, editForm(check, action, edit));
  } else {
    item.append(buttons);
  }
  item.append(respondForm(check, label));
  return item;
}

// Agent Inbox's edit: the same action with other arguments. The customer's yes was for
// the old ones, so it is put to them again with its new preview (nothing is approved).
function editForm(check, action, toggle) {
  const form = el("form", { class: "edit", novalidate: "" });
  const fields = argumentForm(action, check.conversation_id, `edit-${check.check_id}`, check.args);
  const send = el("button", { type: "submit" }, "Ask the customer again with these details");
  form.append(
    el("p", { class: "muted" }, "The customer approved the old details: they are asked again, with the new preview."),
    fields.box,
    send,
  );
  const open = (shown) => {
    form.hidden = !shown;
    toggle.setAttribute("aria-expanded", String(shown));
    if (shown) state.editing.add(check.check_id);
    else state.editing.delete(check.check_id);
  };
  open(state.editing.has(check.check_id));
  toggle.addEventListener("click", () => {
    open(form.hidden);
    if (!form.hidden) fields.box.querySelector("input").focus();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await checkRequest(`${check.check_id}/edit`, { action: check.tool, args: fields.read() });
    if (!answer) return;
    state.editing.delete(check.check_id);
    const lines = answer.preview.lines.join("; ");
    $("checks-status").textContent = `${answer.preview.title}: the customer is asked again with the new details (${lines}).`;
    await afterCheck();
  });
  return form;
}

// Agent Inbox's respond: a message for the customer (and the assistant); the check waits.
function respondForm(check, label) {
  const form = el("form", { class: "respond", novalidate: "" });
  const id = `check-respond-${check.check_id}`;
  const text = el("input", { id, type: "text", maxlength: "4000", autocomplete: "off" });
  const send = el("button", { type: "submit", class: "secondary", "aria-label": `Respond about ${label}` }, "Respond");
  const row = el("div", { class: "search-row" });
  row.append(text, send);
  form.append(el("label", { for: id }, "Message to the customer (shown with your name; the check stays waiting)"), row);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!text.value.trim()) {
      $("checks-error").textContent = "Write the message first.";
      text.focus();
      return;
    }
    if (await checkRequest(`${check.check_id}/respond`, { text: text.value.trim() })) {
      text.value = "";
      $("checks-status").textContent = "Sent to the customer; the check still waits.";
      await afterCheck();
    }
  });
  return form;
}

async function checkRequest(path, body) {
  $("checks-error").textContent = "";
  $("checks-status").textContent = "";
  let response;
  try {
    response = await api(`/desk/checks/${path}`, { method: "POST", body: JSON.stringify(body) });
  } catch (error) {
    if (!(error instanceof SignedOut)) $("checks-error").textContent = "Cannot reach the service; try again.";
    return null;
  }
  if (!response.ok) {
    $("checks-error").textContent = await readProblem(response);
    return null;
  }
  return response.json();
}

async function afterCheck() {
  state.checksText = "";
  state.detailText = "";
  state.stale = true;
  await refresh();
}

// --- proposing an action: a form from the tool's own argument schema -----------------------

async function loadActions() {
  if (state.actions) return;
  const response = await api("/desk/actions");
  if (!response.ok) throw new Error(await readProblem(response));
  state.actions = (await response.json()).actions;
}

function kindOf(property) {
  if (property.type) return property.type;
  const kinds = (property.anyOf || []).map((t) => t.type).filter((t) => t && t !== "null");
  return kinds[0] || "string";
}

// Arguments that name one of the customer's bookings: searched for by name, not typed.
const BOOKING_ARGUMENTS = new Set(["ticket_no", "booking_id"]);

// The fields of an action's arguments, from its JSON schema (`values` filled in). `read()`
// returns the arguments: a whole number for an integer field that is one, otherwise the
// text as typed, which the service refuses naming the argument (it checks strictly).
function argumentForm(action, conversationId, prefix, values = {}) {
  const box = el("div", { class: "fields" });
  const required = new Set(action.arguments.required || []);
  const inputs = [];
  for (const [name, property] of Object.entries(action.arguments.properties || {})) {
    const id = `${prefix}-${name}`;
    const kind = kindOf(property);
    const field = el("div", { class: "field" });
    const shown = name.replaceAll("_", " ");
    field.append(el("label", { for: id }, required.has(name) ? shown : `${shown} (optional)`));
    const input = el("input", { id, name, type: "text", autocomplete: "off", spellcheck: "false" });
    if (kind === "integer") input.setAttribute("inputmode", "numeric");
    if (values[name] !== undefined && values[name] !== null) input.value = String(values[name]);
    field.append(input);
    if (property.description) {
      const hint = el("p", { class: "hint", id: `${id}-hint` }, property.description);
      input.setAttribute("aria-describedby", hint.id);
      field.append(hint);
    }
    if (BOOKING_ARGUMENTS.has(name)) field.append(bookingSearch(action, conversationId, id, input));
    inputs.push({ name, kind, input });
    box.append(field);
  }
  const read = () => {
    const args = {};
    for (const { name, kind, input } of inputs) {
      const text = input.value.trim();
      if (!text) continue;
      args[name] = kind === "integer" && /^-?\d+$/.test(text) ? Number(text) : text;
    }
    return args;
  };
  return { box, read };
}

// Search the customer's tickets and reservations by name; choosing one fills `target`.
function bookingSearch(action, conversationId, fieldId, target) {
  const box = el("div", { class: "booking-search" });
  const searchId = `${fieldId}-search`;
  box.append(el("label", { for: searchId }, "Find the customer's booking by name"));
  const row = el("div", { class: "search-row" });
  const query = el("input", { id: searchId, type: "search", autocomplete: "off", spellcheck: "false" });
  const go = el("button", { type: "button", class: "secondary", "aria-label": `Search the customer's bookings for ${fieldId.split("-").pop().replaceAll("_", " ")}` }, "Search");
  row.append(query, go);
  const results = el("ul", { class: "bookings" });
  const note = el("p", { class: "muted", role: "status" });
  box.append(row, results, note);
  const search = async () => {
    note.textContent = "";
    let response;
    try {
      response = await api(`/desk/${encodeURIComponent(conversationId)}/bookings?q=${encodeURIComponent(query.value.trim())}`);
    } catch (error) {
      if (!(error instanceof SignedOut)) note.textContent = "Cannot reach the service; try again.";
      return;
    }
    if (!response.ok) {
      note.textContent = await readProblem(response);
      return;
    }
    const fitting = (await response.json()).bookings.filter((b) => b.actions.includes(action.name));
    results.replaceChildren(
      ...fitting.map((booking) => {
        const use = el("button", { type: "button", class: "secondary booking" }, booking.label);
        use.addEventListener("click", () => {
          target.value = String(booking.value);
          target.dispatchEvent(new Event("input", { bubbles: true }));
          results.replaceChildren();
          note.textContent = `Chosen: ${booking.label}`;
          target.focus();
        });
        const item = el("li");
        item.append(use);
        return item;
      }),
    );
    note.textContent = fitting.length ? `${fitting.length} found: choose one.` : "None of their bookings matches.";
  };
  go.addEventListener("click", search);
  query.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      search();
    }
  });
  return box;
}

function buildProposeForm() {
  state.proposeFor = state.selected;
  const select = $("propose-action");
  if (!select.options.length) {
    select.append(...(state.actions || []).map((a) => el("option", { value: a.name }, `${a.title} (${a.assistant_label || a.name})`)));
  }
  drawProposeFields();
}

function drawProposeFields() {
  const action = (state.actions || []).find((a) => a.name === $("propose-action").value);
  $("propose-error").textContent = "";
  hidePreview();
  if (!action) return;
  state.proposal = argumentForm(action, state.selected, "propose");
  $("propose-fields").replaceChildren(state.proposal.box);
}

function hidePreview() {
  state.previewed = null;
  $("propose-shown").hidden = true;
}

async function previewProposal() {
  const action = $("propose-action").value;
  const args = state.proposal.read();
  $("propose-error").textContent = "";
  hidePreview();
  const answer = await proposalRequest("proposals/preview", { action, args });
  if (!answer) return;
  state.previewed = { action, args };
  $("propose-title").textContent = answer.title;
  const shown = [previewLines(answer.lines, answer.amount)];
  if (answer.amount) shown.push(amountLine(answer.amount, answer.amount_kind));
  $("propose-lines").replaceChildren(...shown);
  $("propose-shown").hidden = false;
  $("propose-send").focus();
}

async function sendProposal() {
  if (!state.previewed) return;
  const answer = await proposalRequest("proposals", state.previewed);
  if (!answer) return;
  drawProposeFields();
  $("propose-error").textContent = "";
  state.detailText = "";
  state.stale = true;
  await refresh();
  $("propose-action").focus();
}

async function proposalRequest(path, body) {
  let response;
  try {
    response = await api(`/desk/${encodeURIComponent(state.selected)}/${path}`, {
      method: "POST",
      body: JSON.stringify(body),
    });
  } catch (error) {
    if (!(error instanceof SignedOut)) $("propose-error").textContent = "Cannot reach the service; try again.";
    return null;
  }
  if (!response.ok) {
    $("propose-error").textContent = await readProblem(response);
    return null;
  }
  return response.json();
}

async function decideCheck(check, approved, reason) {
  $("checks-error").textContent = "";
  let response;
  try {
    response = await api(`/desk/checks/${check.check_id}`, {
      method: "POST",
      body: JSON.stringify({ approved, reason }),
    });
  } catch (error) {
    if (!(error instanceof SignedOut)) $("checks-error").textContent = "Cannot reach the service; try again.";
    return;
  }
  if (!response.ok) $("checks-error").textContent = await readProblem(response);
  state.checksText = "";
  state.detailText = "";
  state.stale = true;
  await refresh();
}

function queueEntry(handoff) {
  const item = el("li");
  const button = el("button", { type: "button", class: "conversation", "data-id": handoff.conversation_id });
  const head = handoff.status === "waiting" ? `${handoff.place}. ` : "";
  button.append(el("span", { class: "who-line" }, `${head}Passenger ${handoff.passenger_id}`));
  const why = handoff.reason || "(no reason given)";
  const by = handoff.requested_by === "customer" ? "asked by the customer" : "sent by the assistant";
  button.append(el("span", { class: "title" }, `${why} (${by})`));
  button.append(el("span", { class: "when" }, `since ${timeOf(handoff.requested_at)}`));
  button.addEventListener("click", () => select(handoff.conversation_id));
  item.append(button);
  return item;
}

// The panel of the selected conversation: take it, write, hand it back; or who has it.
function drawPerson() {
  const handoff = state.selected ? state.handoffs.get(state.selected) : undefined;
  const read = state.detail && state.detail.conversation;
  const other = !handoff && read && read.conversation_id === state.selected && read.answers === "person"; // one of ours would be in the queue's map
  $("person-section").hidden = !handoff && !other;
  if (other) {
    $("person-state").textContent = `${read.answers_text}: only they write to the customer or hand it back.`;
    $("take").hidden = true;
    $("person-form").hidden = true;
    $("propose-form").hidden = true;
    $("hand-back-form").hidden = true;
    return;
  }
  if (!handoff) return;
  const mine = handoff.status === "held";
  const summary = handoff.summary ? ` The assistant's summary: ${handoff.summary}` : "";
  $("person-state").textContent = mine
    ? `You have this conversation: the assistant stays silent until you hand it back.${summary}`
    : `Waiting for a person since ${timeOf(handoff.requested_at)}: ${handoff.reason || "no reason given"}.${summary}`;
  $("take").hidden = mine;
  $("person-form").hidden = !mine;
  $("propose-form").hidden = !mine;
  $("hand-back-form").hidden = !mine;
  if (mine && state.proposeFor !== state.selected) buildProposeForm();
}

// A hand-back (or close) over a pending action says first what it would end: the service
// refuses it once, naming it, and the person confirms.
async function handBack(close, endPending) {
  $("end-pending").hidden = true;
  state.closing = close;
  const body = { note: $("hand-back-note").value.trim(), close, end_pending: endPending };
  const done = await deskAction("hand-back", body);
  if (done) {
    $("hand-back-note").value = "";
  } else if (!endPending && $("person-error").textContent.endsWith("Confirm to go on.")) {
    $("end-pending").hidden = false;
    $("end-pending-go").focus();
  }
}

async function deskAction(path, body) {
  $("person-error").textContent = "";
  let response;
  try {
    response = await api(`/desk/${encodeURIComponent(state.selected)}/${path}`, {
      method: "POST",
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (error) {
    if (!(error instanceof SignedOut)) $("person-error").textContent = "Cannot reach the service; try again.";
    return false;
  }
  if (!response.ok) {
    $("person-error").textContent = await readProblem(response);
    state.queueText = ""; // someone else may have taken it: show the queue as it is
    await refresh();
    return false;
  }
  state.queueText = "";
  state.detailText = "";
  state.stale = true;
  await refresh();
  return true;
}

// --- start -------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) {
      $("sign-in-error").textContent = "Paste your supervisor token first.";
      return;
    }
    signIn(token);
  });
  $("sign-out").addEventListener("click", () => signOut());
  $("filter").addEventListener("input", drawList);
  $("take").addEventListener("click", async () => {
    if (await deskAction("take")) $("person-message").focus();
  });
  $("person-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("person-message").value.trim();
    if (!text) return;
    if (await deskAction("messages", { text })) $("person-message").value = "";
  });
  $("propose-action").addEventListener("change", drawProposeFields);
  $("propose-fields").addEventListener("input", hidePreview); // Send sends what was previewed
  $("propose-form").addEventListener("submit", (event) => {
    event.preventDefault();
    previewProposal();
  });
  $("propose-send").addEventListener("click", sendProposal);
  $("hand-back-form").addEventListener("submit", (event) => {
    event.preventDefault();
    handBack(false, false);
  });
  $("close-handoff").addEventListener("click", () => handBack(true, false));
  $("end-pending-go").addEventListener("click", () => handBack(state.closing, true));
  $("end-pending-cancel").addEventListener("click", () => {
    $("end-pending").hidden = true;
    $("person-error").textContent = "";
  });
  $("back").addEventListener("click", () => {
    $("desk").dataset.view = "list";
    const current = document.querySelector(".conversation[aria-current]");
    (current || $("filter")).focus();
  });
  window.addEventListener("hashchange", () => {
    const token = tokenFromFragment();
    if (token) signIn(token);
  });
  const token = tokenFromFragment() || sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else signOut();
});
