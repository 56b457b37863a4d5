// The web chat: talks to the service's JSON API and reads turns as server-sent events.
// Plain JavaScript, no build step. Text from the API is only ever set as textContent.
"use strict";

const TOKEN_KEY = "travel-assistant-token";
const API = "/api/v1";

const state = {
  token: null,
  conversationId: null,
  busy: false,
  streaming: new Map(), // message id -> the bubble its tokens go to
  pending: [], // the actions on screen
  decisions: new Map(), // tool_call_id -> {approved, reason}
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

// --- the token -------------------------------------------------------------------------

function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    // Keep it out of the address bar and the history.
    history.replaceState(null, "", location.pathname + location.search);
  }
  return token;
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(API + path, { ...options, headers });
  if (response.status === 401) {
    const problem = await readProblem(response);
    signOut(problem);
    throw new Error(problem);
  }
  return response;
}

async function readProblem(response) {
  try {
    const body = await response.json();
    if (typeof body.detail === "string") return body.detail;
    if (Array.isArray(body.detail) && body.detail.length) {
      return body.detail.map((d) => d.msg.replace(/^Value error, /, "")).join(" ");
    }
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
    signOut(error.message);
    return false;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("who-text").textContent = `Passenger ${me.passenger_id}`;
  $("who").hidden = false;
  $("sign-in").hidden = true;
  $("chat").hidden = false;
  await refreshConversations();
  return true;
}

function signOut(message = "") {
  state.token = null;
  state.conversationId = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").hidden = true;
  $("chat").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message;
  $("token-input").value = "";
  $("token-input").focus();
}

// --- conversations ---------------------------------------------------------------------

async function refreshConversations() {
  const response = await api("/conversations");
  if (!response.ok) return;
  const { conversations } = await response.json();
  const list = $("conversation-list");
  list.replaceChildren();
  for (const conversation of conversations) {
    const button = el("button", { type: "button" });
    const when = new Date(conversation.updated_at).toLocaleString();
    button.append(el("span", {}, conversation.title || "(no message yet)"));
    button.append(el("span", { class: "help" }, ` — ${when}`));
    if (conversation.pending_actions) {
      button.append(el("span", { class: "badge" }, "Waiting for your decision"));
    }
    if (conversation.conversation_id === state.conversationId) {
      button.setAttribute("aria-current", "true");
    }
    button.addEventListener("click", () => openConversation(conversation.conversation_id));
    const item = el("li");
    item.append(button);
    list.append(item);
  }
}

function newConversation() {
  state.conversationId = null;
  $("conversation-heading").textContent = "New conversation";
  $("log").replaceChildren();
  showPending([]);
  setStatus("");
  refreshConversations();
  $("message").focus();
}

async function ensureConversation() {
  if (state.conversationId) return state.conversationId;
  const response = await api("/conversations", { method: "POST" });
  if (!response.ok) throw new Error(await readProblem(response));
  const conversation = await response.json();
  state.conversationId = conversation.conversation_id;
  return state.conversationId;
}

async function openConversation(id) {
  state.conversationId = id;
  $("log").replaceChildren();
  showPending([]);
  const [history, pending] = await Promise.all([
    api(`/conversations/${encodeURIComponent(id)}/messages`),
    api(`/conversations/${encodeURIComponent(id)}/pending`),
  ]);
  if (!history.ok) {
    setStatus(await readProblem(history));
    return;
  }
  const { items } = await history.json();
  const first = items.find((item) => item.type === "customer");
  $("conversation-heading").textContent = first ? first.text.slice(0, 80) : "New conversation";
  for (const item of items) showHistoryItem(item);
  if (pending.ok) showPending((await pending.json()).actions);
  await refreshConversations();
}

// --- the log ---------------------------------------------------------------------------

function logItem(className) {
  const item = el("li", { class: className });
  $("log").append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

function showCustomer(text) {
  logItem("customer").append(el("p", { class: "bubble" }, text));
}

function assistantBubble(label) {
  const item = logItem("assistant");
  item.append(el("span", { class: "who-said" }, label ? `Assistant (${label})` : "Assistant"));
  const bubble = el("p", { class: "bubble" });
  item.append(bubble);
  return bubble;
}

function showHistoryItem(item) {
  if (item.type === "customer") showCustomer(item.text);
  else if (item.type === "assistant") assistantBubble(item.label).textContent = item.text;
  else if (item.type === "notice") logItem("notice").textContent = item.text;
  else if (item.type === "action") showRecord(item);
}

// The record's sentence comes from the service (the words the terminal's /history shows);
// the page only styles it by outcome.
function showRecord(item) {
  logItem(`record ${item.outcome}`).textContent = item.text;
}

function setStatus(text) {
  $("status").textContent = text;
}

// --- turns -----------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("message").setAttribute("aria-busy", String(busy));
  for (const button of document.querySelectorAll(".approval button")) {
    if (busy) button.disabled = true;
  }
}

async function streamTurn(path, body) {
  setBusy(true);
  state.streaming.clear();
  setStatus("The assistant is writing…");
  let finished = false;
  try {
    const response = await api(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const problem = await readProblem(response);
      logItem("problem").textContent = problem;
      setStatus(problem);
      return false;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (handleBlock(block)) finished = true;
      }
    }
    if (!finished) setStatus("The connection was lost; the reply is saved. Open the conversation again.");
    return true;
  } catch (error) {
    setStatus(error.message);
    return false;
  } finally {
    setBusy(false);
    refreshConversations();
  }
}

function handleBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return false;
  const payload = JSON.parse(data.join("\n"));
  return handleEvent(event, payload);
}

function handleEvent(event, payload) {
  switch (event) {
    case "token": {
      let bubble = state.streaming.get(payload.message_id);
      if (!bubble) {
        bubble = assistantBubble(payload.label);
        state.streaming.set(payload.message_id, bubble);
      }
      bubble.textContent += payload.text;
      return false;
    }
    case "message": {
      const bubble = state.streaming.get(payload.id) || assistantBubble(payload.label);
      bubble.textContent = payload.text;
      state.streaming.set(payload.id, bubble);
      return false;
    }
    case "status":
      logItem("activity").textContent = payload.text;
      return false;
    case "pending":
      showPending(payload.actions);
      return false;
    case "done":
      setStatus(payload.pending_actions ? "Waiting for your decision." : "");
      if (!payload.pending_actions) $("message").focus();
      return true;
    case "error":
      logItem("problem").textContent = payload.detail;
      setStatus(payload.detail);
      return true;
    default:
      return false;
  }
}

async function send(event) {
  event.preventDefault();
  if (state.busy) return;
  const box = $("message");
  const text = box.value.trim();
  if (!text) {
    setStatus("Type a message first.");
    return;
  }
  let id;
  try {
    id = await ensureConversation();
  } catch (error) {
    setStatus(error.message);
    return;
  }
  if ($("conversation-heading").textContent === "New conversation") {
    $("conversation-heading").textContent = text.slice(0, 80);
  }
  showCustomer(text);
  box.value = "";
  showPending([]);
  const ok = await streamTurn(`/conversations/${encodeURIComponent(id)}/messages`, { text });
  if (!ok && !box.value) box.value = text; // nothing was sent: give the text back
}

// --- approvals -------------------------------------------------------------------------

function showPending(actions) {
  state.pending = actions;
  state.decisions.clear();
  const region = $("approvals");
  region.replaceChildren();
  region.hidden = actions.length === 0;
  actions.forEach((action, index) => region.append(approvalCard(action, index, actions.length)));
  const heading = region.querySelector("h3");
  if (heading) heading.focus();
}

function approvalCard(action, index, total) {
  const preview = action.preview;
  const id = action.tool_call_id.replace(/[^A-Za-z0-9_-]/g, "_");
  const counter = total > 1 ? ` (${index + 1} of ${total})` : "";
  const impossible = Boolean(preview.error);
  const card = el("article", {
    class: impossible ? "approval impossible" : "approval",
    "aria-labelledby": `approval-${id}`,
    "data-tool-call-id": action.tool_call_id,
  });
  const title = impossible ? `Not possible${counter}: ${preview.title}` : `Approval needed${counter}: ${preview.title}`;
  card.append(el("h3", { id: `approval-${id}`, tabindex: "-1" }, title));
  const decision = el("div", { class: "decision" });
  if (impossible) {
    card.append(el("p", {}, preview.error));
    card.append(el("p", { class: "help" }, "Nothing will be changed; the assistant is told why and can suggest something else."));
    const buttons = el("div", { class: "buttons" });
    const ok = el("button", { type: "button", class: "decline" }, "OK, tell the assistant");
    ok.addEventListener("click", () => choose(action, card, false, ""));
    buttons.append(ok);
    decision.append(buttons);
    card.append(decision);
    return card;
  }
  const lines = preview.amount ? preview.lines.slice(0, -1) : preview.lines;
  const list = el("ul", { class: "preview-lines" });
  for (const line of lines) list.append(el("li", {}, line));
  card.append(list);
  if (preview.amount) {
    card.append(el("p", { class: `amount ${preview.amount_kind || ""}` }, preview.amount));
  }
  const reasonId = `reason-${id}`;
  decision.append(el("label", { for: reasonId }, "Reason if you decline (optional, passed to the assistant)"));
  const reason = el("input", { id: reasonId, type: "text", maxlength: "500", autocomplete: "off" });
  decision.append(reason);
  const buttons = el("div", { class: "buttons" });
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  const decline = el("button", { type: "button", class: "decline" }, "Decline");
  approve.addEventListener("click", () => choose(action, card, true, ""));
  decline.addEventListener("click", () => choose(action, card, false, reason.value));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      choose(action, card, false, reason.value);
    }
  });
  buttons.append(approve, decline);
  decision.append(buttons);
  card.append(decision);
  return card;
}

async function choose(action, card, approved, reason) {
  if (state.busy) return;
  const text = reason.trim();
  state.decisions.set(action.tool_call_id, { tool_call_id: action.tool_call_id, approved, reason: text || null });
  for (const button of card.querySelectorAll("button, input")) button.disabled = true;
  card.append(el("p", { class: "chosen" }, approved ? "You approved this." : "You declined this."));
  if (state.decisions.size < state.pending.length) {
    setStatus("Decide the other actions too, then the assistant goes on.");
    const next = [...document.querySelectorAll(".approval")].find((c) => !state.decisions.has(c.dataset.toolCallId));
    if (next) next.querySelector("h3").focus();
    return;
  }
  const decisions = [...state.decisions.values()];
  const id = state.conversationId;
  await streamTurn(`/conversations/${encodeURIComponent(id)}/decisions`, { decisions });
  // The cards are answered: what became of them is in the log from now on.
  if (state.pending.every((a) => state.decisions.has(a.tool_call_id))) {
    const pending = await api(`/conversations/${encodeURIComponent(id)}/pending`);
    if (pending.ok) showPending((await pending.json()).actions);
  }
}

// --- start -----------------------------------------------------------------------------

function start() {
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) {
      $("sign-in-error").textContent = "Paste your access token first.";
      return;
    }
    $("sign-in-error").textContent = "";
    await signIn(token);
  });
  $("sign-out").addEventListener("click", () => signOut(""));
  $("new-conversation").addEventListener("click", newConversation);
  $("composer").addEventListener("submit", send);
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  const token = tokenFromFragment() || sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    signIn(token);
  } else {
    signOut("");
  }
}

document.addEventListener("DOMContentLoaded", start);
