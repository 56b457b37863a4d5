// The web chat: talks to the service's JSON API and reads turns as server-sent events.
// Plain JavaScript, no build step. Text from the API is set as textContent; the one
// exception is a reply's `html`, which the service rendered from Markdown and cleaned
// with a maintained sanitizer (server/markdown.py), and the page's policy runs no
// script but this one.
//
// The live view and a reopened conversation are drawn by the same function (`drawItem`)
// from the same items (the history's, which a turn's `record` and `message` events
// carry too), keyed so a turn read again after a reload or a lost connection replaces
// what is on screen instead of repeating it.
"use strict";

const TOKEN_KEY = "travel-assistant-token";
const API = "/api/v1";
const GENERIC_PROBLEM = "Something went wrong on our side. Your conversation is saved; please try again.";
const NO_CONNECTION = "No connection to the service.";
const MAX_BACKOFF_MS = 15000;
const ELSEWHERE_POLL_MS = 2000;
// How often an open conversation asks whether another tab (or the terminal, a person,
// another worker, a member of staff) changed it: one request a tick (`watchConversation`).
const TAB_POLL_MS = 1500;
const WAITING_FOR_YOU = "Waiting for your decision.";
const WAITING_FOR_CHECK = "Waiting for a check by our customer-service team.";

const state = {
  token: null,
  conversationId: null,
  conversations: [],
  busy: false,
  visit: 0, // bumped whenever another conversation is shown: stale loops stop
  pending: [], // the actions on screen
  decisions: new Map(), // tool_call_id -> {tool_call_id, approved, reason}
  stick: true, // the view follows new text while the reader is at the bottom
  overridePending: false,
  liveCounter: 0,
  person: null, // {status, place, agent, text, messages} while a person has it or will
  handler: "", // the label of the assistant that answers next ("" for the primary)
  syncing: null, // the visit whose conversation is watched for what others do
  seen: { summary: null, person: null }, // the keys of what the last looks read
  checked: null, // the actions whose decided checks were said: the next look goes on
  wake: null, // ends the wait before the next look (the tab came into view)
};

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const narrow = () => window.matchMedia("(max-width: 720px)").matches;
const coarse = () => window.matchMedia("(pointer: coarse)").matches;

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
    history.replaceState(history.state, "", location.pathname + location.search);
  }
  return token;
}

class Offline extends Error {}

// Every request: a network failure becomes `Offline` (never the browser's words).
async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  let response;
  try {
    response = await fetch(API + path, { ...options, headers });
  } catch (_) {
    throw new Offline(NO_CONNECTION);
  }
  if (response.status === 401) {
    const problem = await readProblem(response);
    signOut(problem);
    throw new Error(problem);
  }
  return response;
}

// The service's words for a refusal (written for the customer); never a server error's.
async function readProblem(response) {
  if (response.status >= 500) return GENERIC_PROBLEM;
  try {
    const body = await response.json();
    if (typeof body.detail === "string") return body.detail;
    if (Array.isArray(body.detail) && body.detail.length) {
      return body.detail.map((d) => String(d.msg).replace(/^Value error, /, "")).join(" ");
    }
  } catch (_) {
    // not JSON
  }
  return GENERIC_PROBLEM;
}

async function signIn(token) {
  state.token = token;
  let me;
  try {
    const response = await api("/me");
    if (!response.ok) throw new Error(await readProblem(response));
    me = await response.json();
  } catch (error) {
    if (state.token === token) signOut(error.message);
    return false;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("who-text").textContent = `Passenger ${me.passenger_id}`;
  $("who").hidden = false;
  $("menu").hidden = false;
  $("sign-in").hidden = true;
  $("chat").hidden = false;
  const id = conversationFromPath() || (await decidedWhileAway());
  if (id) await openConversation(id, { push: false });
  else showNewConversation({ push: false });
  // What waits for the customer has the focus: an approval's card, else the message box.
  const waiting = document.querySelector(".approval h3");
  if (waiting) waiting.focus();
  else $("message").focus();
  return true;
}

// --- the welcome of an empty conversation ------------------------------------------------

// What the assistant can do, and questions drawn from the passenger's bookings.
async function loadSuggestions() {
  let welcome;
  try {
    const response = await api("/suggestions");
    if (!response.ok) return;
    welcome = await response.json();
  } catch (_) {
    return; // the welcome stays without them
  }
  $("welcome-text").textContent = welcome.greeting;
  const list = $("suggestion-list");
  list.replaceChildren();
  for (const question of welcome.questions) {
    const button = el("button", { type: "button", class: "secondary" }, question);
    button.addEventListener("click", () => askSuggestion(question));
    const item = el("li");
    item.append(button);
    list.append(item);
  }
  $("suggestions").hidden = !welcome.questions.length;
}

// One click asks it: sent as the customer's message.
function askSuggestion(question) {
  if (state.busy || state.pending.length) return;
  sendText(question, { echo: true });
}

// Shown in an empty conversation (the page's style hides it once the log has a line),
// with questions from the bookings as they are now.
function showWelcome(shown) {
  $("welcome").hidden = !shown;
  if (shown) loadSuggestions();
}

// Who answers here now: the assistant or one of its specialists, or a person.
function showHandler(label) {
  if (label !== undefined) state.handler = label || "";
  const person = state.person;
  let text;
  if (person && person.status === "with_person") text = `With: ${person.agent} (customer service)`;
  else if (person) text = "Waiting for a person from customer service";
  else text = state.handler ? `With: the ${state.handler} specialist` : "With: the assistant";
  $("handler").textContent = text;
}

function signOut(message = "") {
  state.token = null;
  state.conversationId = null;
  state.visit += 1;
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").hidden = true;
  $("menu").hidden = true;
  $("chat").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message;
  $("token-input").value = "";
  $("token-input").focus();
}

// --- addresses -------------------------------------------------------------------------

function conversationFromPath() {
  const match = location.pathname.match(/^\/c\/([A-Za-z0-9][A-Za-z0-9_.:-]{0,99})$/);
  return match ? decodeURIComponent(match[1]) : null;
}

function goTo(id, push) {
  const path = id ? `/c/${encodeURIComponent(id)}` : "/";
  if (location.pathname === path) return;
  if (push) history.pushState({ conversation: id }, "", path);
  else history.replaceState({ conversation: id }, "", path);
}

// --- the list of conversations ---------------------------------------------------------

async function refreshConversations() {
  let conversations;
  try {
    const response = await api("/conversations");
    if (!response.ok) return;
    ({ conversations } = await response.json());
  } catch (_) {
    return; // the list on screen stays until the next try
  }
  state.conversations = conversations;
  const list = $("conversation-list");
  list.replaceChildren();
  if (!conversations.length) list.append(el("li", { class: "help empty" }, "No conversations yet."));
  for (const conversation of conversations) list.append(conversationEntry(conversation));
  const current = conversations.find((c) => c.conversation_id === state.conversationId);
  if (current) setHeading(current.title);
  if (current && !state.busy) showHandler(current.assistant_label);
}

// A customer who comes back to the page lands on the conversation whose action our team
// decided since their last message, once: not on a new one with no sign of it.
const SEEN_KEY = "travel-assistant-seen-checks";

async function decidedWhileAway() {
  await refreshConversations();
  const latest = (state.conversations || []).find((c) => c.checked);
  if (!latest) return null;
  let seen = {};
  try {
    seen = JSON.parse(localStorage.getItem(SEEN_KEY) || "{}");
  } catch (_) {
    seen = {};
  }
  if (seen[latest.conversation_id] === latest.checked) return null;
  seen[latest.conversation_id] = latest.checked;
  localStorage.setItem(SEEN_KEY, JSON.stringify(seen));
  return latest.conversation_id;
}

function titleOf(conversation) {
  return conversation.title || "New conversation";
}

function conversationEntry(conversation) {
  const id = conversation.conversation_id;
  const title = titleOf(conversation);
  const item = el("li", { class: "entry" });
  const open = el("a", { href: `/c/${encodeURIComponent(id)}`, class: "open" });
  open.append(el("span", { class: "title" }, title));
  open.append(el("span", { class: "when" }, new Date(conversation.updated_at).toLocaleString()));
  if (conversation.busy) open.append(el("span", { class: "badge busy" }, "Answering…"));
  else if (conversation.checked) open.append(el("span", { class: "badge" }, "Our team decided"));
  else if (conversation.pending_actions && conversation.checks_waiting >= conversation.pending_actions)
    open.append(el("span", { class: "badge" }, "Waiting for our team's check"));
  else if (conversation.pending_actions) open.append(el("span", { class: "badge" }, "Waiting for your decision"));
  if (id === state.conversationId) open.setAttribute("aria-current", "page");
  open.addEventListener("click", (event) => {
    event.preventDefault();
    closeMenu();
    openConversation(id, { push: true });
  });
  const tools = el("div", { class: "entry-tools" });
  const rename = el("button", { type: "button", class: "link", "aria-label": `Rename “${title}”` }, "Rename");
  const remove = el("button", { type: "button", class: "link danger", "aria-label": `Delete “${title}”` }, "Delete");
  rename.addEventListener("click", () => startRename(item, conversation));
  remove.addEventListener("click", () => confirmDelete(item, conversation));
  tools.append(rename, remove);
  item.append(open, tools);
  return item;
}

function startRename(item, conversation) {
  const id = conversation.conversation_id;
  const form = el("form", { class: "rename" });
  const inputId = `rename-${state.liveCounter++}`;
  form.append(el("label", { for: inputId }, "New title"));
  const input = el("input", { id: inputId, type: "text", maxlength: "200", autocomplete: "off" });
  input.value = conversation.title;
  const save = el("button", { type: "submit" }, "Save");
  const cancel = el("button", { type: "button", class: "secondary" }, "Cancel");
  const problem = el("p", { class: "error", role: "alert" });
  const buttons = el("div", { class: "buttons" });
  buttons.append(save, cancel);
  form.append(input, buttons, problem);
  item.replaceChildren(form);
  input.focus();
  input.select();
  cancel.addEventListener("click", () => refreshConversations());
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") refreshConversations();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = input.value.trim();
    if (!title) {
      problem.textContent = "Type a title first.";
      return;
    }
    try {
      const response = await api(`/conversations/${encodeURIComponent(id)}`, {
        method: "PATCH",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ title }),
      });
      if (!response.ok) {
        problem.textContent = await readProblem(response);
        return;
      }
    } catch (error) {
      problem.textContent = error instanceof Offline ? `${NO_CONNECTION} Try again.` : GENERIC_PROBLEM;
      return;
    }
    await refreshConversations();
    announce(`Renamed to ${title}.`);
    focusEntry(id);
  });
}

function focusEntry(id) {
  const link = [...document.querySelectorAll("#conversation-list a.open")].find(
    (a) => a.getAttribute("href") === `/c/${encodeURIComponent(id)}`,
  );
  if (link) link.focus();
}

function confirmDelete(item, conversation) {
  const id = conversation.conversation_id;
  const box = el("div", { class: "confirm", role: "group", "aria-label": "Delete this conversation?" });
  box.append(el("p", {}, `Delete “${titleOf(conversation)}” and everything said in it?`));
  const yes = el("button", { type: "button", class: "danger" }, "Delete for good");
  const no = el("button", { type: "button", class: "secondary" }, "Keep it");
  const problem = el("p", { class: "error", role: "alert" });
  const buttons = el("div", { class: "buttons" });
  buttons.append(yes, no);
  box.append(buttons, problem);
  item.replaceChildren(box);
  no.focus();
  no.addEventListener("click", async () => {
    await refreshConversations();
    focusEntry(id);
  });
  yes.addEventListener("click", async () => {
    try {
      const response = await api(`/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
      if (!response.ok && response.status !== 404) {
        problem.textContent = await readProblem(response);
        return;
      }
    } catch (error) {
      problem.textContent = error instanceof Offline ? `${NO_CONNECTION} Try again.` : GENERIC_PROBLEM;
      return;
    }
    announce("The conversation was deleted.");
    if (id === state.conversationId) showNewConversation({ push: true });
    else await refreshConversations();
    $("new-conversation").focus();
  });
}

// --- the phone's menu ------------------------------------------------------------------

function openMenu() {
  $("chat").classList.add("menu-open");
  $("menu").setAttribute("aria-expanded", "true");
  $("backdrop").hidden = false;
  document.querySelector("main.conversation").inert = true;
  $("new-conversation").focus();
}

function closeMenu() {
  if (!$("chat").classList.contains("menu-open")) return;
  $("chat").classList.remove("menu-open");
  $("menu").setAttribute("aria-expanded", "false");
  $("backdrop").hidden = true;
  document.querySelector("main.conversation").inert = false;
  $("menu").focus();
}

// --- one conversation ------------------------------------------------------------------

function setHeading(title) {
  $("conversation-heading").textContent = title || "New conversation";
}

function clearConversation() {
  state.visit += 1;
  $("log").replaceChildren();
  showPending([]);
  setStatus("");
  setConnection("");
  setBusy(false);
  hideWarning();
  showWelcome(false);
  showPerson(null);
  showHandler("");
}

function showNewConversation({ push }) {
  clearConversation();
  state.conversationId = null;
  goTo(null, push);
  setHeading("");
  showWelcome(true);
  refreshConversations();
  $("message").focus();
}

async function ensureConversation() {
  if (state.conversationId) return state.conversationId;
  const response = await api("/conversations", { method: "POST" });
  if (!response.ok) throw new Error(await readProblem(response));
  const conversation = await response.json();
  state.conversationId = conversation.conversation_id;
  goTo(state.conversationId, true);
  watchConversation(state.conversationId, state.visit, { summary: conversation });
  return state.conversationId;
}

// Show conversation `id` as saved, and follow the turn still running in it, if any.
async function openConversation(id, { push }) {
  clearConversation();
  state.conversationId = id;
  const visit = state.visit;
  goTo(id, push);
  setHeading("");
  let loaded;
  try {
    loaded = await loadConversation(id);
  } catch (error) {
    if (visit !== state.visit) return;
    setStatus(error instanceof Offline ? `${NO_CONNECTION} Reload the page to try again.` : GENERIC_PROBLEM);
    return;
  }
  if (visit !== state.visit) return;
  if (!loaded) {
    state.conversationId = null;
    goTo(null, false);
    setStatus("That conversation does not exist or was deleted. You can start a new one.");
    refreshConversations();
    return;
  }
  refreshConversations();
  watchConversation(id, visit, loaded);
  if (loaded.summary.busy) {
    setBusy(true);
    await follow(id, null, visit);
    if (visit === state.visit) setBusy(false);
  }
}

// Draw the history, the pending actions and who has `id`; return what was read of it,
// {summary, person} (null: not found).
async function loadConversation(id) {
  const base = `/conversations/${encodeURIComponent(id)}`;
  const [summary, history, pending, person] = await Promise.all([
    api(base),
    api(`${base}/messages`),
    api(`${base}/pending`),
    api(`${base}/person`),
  ]);
  if (summary.status === 404 || history.status === 404) return null;
  if (!summary.ok || !history.ok) throw new Error(GENERIC_PROBLEM);
  const conversation = await summary.json();
  setHeading(conversation.title);
  const { items } = await history.json();
  let who = null;
  try {
    who = person.ok ? await person.json() : null;
  } catch (_) {
    // cut mid-answer: the next look asks again
  }
  for (const item of items) drawItem(item);
  if (who) showPersonChange(who, false); // handed back meanwhile: the log says so
  showHandler(conversation.assistant_label);
  showWelcome(!items.length);
  showPending(pending.ok ? (await pending.json()).actions : []);
  scrollToEnd(true);
  return { summary: conversation, person: who };
}

async function reloadConversation(id) {
  $("log").replaceChildren();
  try {
    await loadConversation(id);
  } catch (_) {
    // what is on screen stays
  }
  refreshConversations();
}

// Every open tab of a conversation shows what happens in the others, and what a person or
// a member of staff does: one watcher per open conversation (and visit). While nothing
// runs here and the tab is in view it asks every TAB_POLL_MS one thing, and compares it
// with what it read last (a tab coming into view asks at once):
// - the conversation's summary (its messages, busy, pending_actions, checks_waiting);
// - while a person has the conversation or will, the person's state instead (status,
//   place in the queue, name, and a counter that moves whenever either side writes): the
//   summary does not say when a person takes it, hands it back or the queue moves.
// What moved is then read and dispatched (`sync`): a turn running elsewhere is followed
// as it streams; the history and the cards are drawn as saved (a message, a reply, a
// decision, a check decided, a person's line); the person's line says who has it. Staff's
// decided checks that nobody went on with are gone on with (`goOnChecked`). What this
// tab did itself is taken as seen as soon as it is done (`rebase`): a change in between
// (another tab's) is never taken for this tab's own.
async function watchConversation(id, visit, known = {}) {
  if (!id || state.syncing === visit) return;
  state.syncing = visit;
  state.checked = null;
  state.seen = {
    summary: known.summary ? summaryKey(known.summary) : null, // as shown now
    person: known.person ? personKey(known.person) : null,
  };
  try {
    while (visit === state.visit) {
      await new Promise((resolve) => {
        state.wake = resolve;
        setTimeout(resolve, TAB_POLL_MS);
      });
      if (visit !== state.visit) return;
      if (state.busy || document.visibilityState === "hidden") continue;
      const what = state.person ? "person" : "summary";
      const read = await readForVisit(id, what === "person" ? "person" : "", visit);
      if (!read) continue; // offline, refused, moved on, or a turn of this tab began
      const before = state.seen[what];
      state.seen[what] = what === "person" ? personKey(read) : summaryKey(read);
      if (before !== null && before !== state.seen[what]) {
        await sync(id, visit, { [what]: read });
        if (visit !== state.visit) return;
      }
      if (!state.busy) await goOnChecked(id, visit);
    }
  } finally {
    if (state.syncing === visit) state.syncing = null;
  }
}

// Something changed: read what the look did not (the summary, the person's state), follow
// a turn that runs, draw the history and the cards as saved, and say who has it now.
async function sync(id, visit, known) {
  const again = () => {
    // Not read this time (offline, or this tab's own turn began): the next look tries again.
    if (visit === state.visit) state.seen = { summary: "", person: "" };
  };
  const summary = known.summary || (await readForVisit(id, "", visit));
  if (!summary) return again();
  state.seen.summary = summaryKey(summary);
  if (summary.busy) {
    setBusy(true);
    await follow(id, null, visit);
    if (visit !== state.visit) return;
    setBusy(false); // takes the end of that turn as seen (`rebase`)
  }
  // The cards too: a turn's events do not clear them.
  if (!(await redrawHistory(id, visit))) return again();
  const person = known.person || (await readForVisit(id, "person", visit));
  if (!person) return again();
  showPersonChange(person, true);
  // What waits now, unless the line says something else (a problem, what to do next).
  if ([WAITING_FOR_YOU, WAITING_FOR_CHECK, ""].includes($("status").textContent)) {
    setStatus(waitingText());
  }
  refreshConversations();
}

// Take what this tab did itself as seen: read the summary and the person's state at once
// when its turn (or its request for a person, or its leaving the queue) is done, in view
// or not, so that only what others do is drawn again. The assistant may have handed the
// conversation to a person in the turn: the person's line says so.
async function rebase(id, visit) {
  if (!id) return;
  const base = `/conversations/${encodeURIComponent(id)}`;
  const read = async (path) => {
    try {
      const response = await api(path);
      return response.ok ? await response.json() : null;
    } catch (_) {
      return null; // offline: the next look compares with what was seen before
    }
  };
  const [summary, person] = await Promise.all([read(base), read(`${base}/person`)]);
  if (visit !== state.visit || state.busy) return;
  if (summary) state.seen.summary = summaryKey(summary);
  if (person) showPersonChange(person, false);
  // An action proposed meanwhile (a person's, another tab's) has no card here yet: what
  // is saved is drawn, so that this tab's own doing never hides it.
  if (summary && summary.pending_actions !== state.pending.length) await redrawHistory(id, visit);
}

// What of a conversation's summary tells that something happened in it.
function summaryKey(summary) {
  return JSON.stringify([summary.messages, summary.busy, summary.pending_actions, summary.checks_waiting]);
}

// What of the person's state tells that something happened: either side wrote (its
// counter), they took it or handed it back, the queue moved.
function personKey(person) {
  return JSON.stringify([person.status, person.place, person.agent, person.messages]);
}

// What the status line says while nothing runs, from the actions on screen.
function waitingText() {
  if (!state.pending.length) return "";
  return state.pending.every((a) => a.check) ? WAITING_FOR_CHECK : WAITING_FOR_YOU;
}

// --- the log ---------------------------------------------------------------------------

function keyOf(item) {
  if (item.type === "assistant" && item.id) return `m:${item.id}`;
  if (item.type === "customer" && item.id) return `c:${item.id}`;
  if (item.type === "action") return `a:${item.tool_call_id}`;
  return null;
}

function findKey(key) {
  return key ? [...$("log").children].find((node) => node.dataset.key === key) : undefined;
}

function addToLog(node, key) {
  if (key) node.dataset.key = key;
  const existing = findKey(key);
  if (existing) existing.replaceWith(node);
  else $("log").append(node);
  scrollToEnd();
  return node;
}

// One history item, drawn the same whether it arrives live or with the history.
function drawItem(item) {
  const key = keyOf(item);
  if (item.type === "customer") {
    const node = el("li", { class: "customer" });
    node.append(el("span", { class: "visually-hidden" }, "You: "));
    node.append(el("p", { class: "bubble" }, item.text));
    return addToLog(node, key);
  }
  if (item.type === "assistant" && item.person) return addToLog(personNode(item), key);
  if (item.type === "assistant") return addToLog(assistantNode(item.label, item.html, null), key);
  if (item.type === "action") return addToLog(recordNode(item), key);
  return addToLog(el("li", { class: "notice" }, item.text), key);
}

function assistantNode(label, html, text) {
  const node = el("li", { class: "assistant" });
  node.append(el("span", { class: "who-said" }, label ? `Assistant (${label})` : "Assistant"));
  const bubble = el("div", { class: "bubble" });
  if (html !== null) {
    bubble.innerHTML = html; // sanitized by the service (server/markdown.py)
    node.dataset.final = "1";
  } else {
    bubble.classList.add("streaming");
    bubble.textContent = text || "";
  }
  node.append(bubble);
  return node;
}

// A message from a person of the customer-service team, with their name.
function personNode(item) {
  const node = el("li", { class: "assistant person" });
  node.append(el("span", { class: "who-said" }, `${item.person} (customer service)`));
  const bubble = el("div", { class: "bubble" });
  bubble.innerHTML = item.html; // sanitized by the service (server/markdown.py)
  node.dataset.final = "1";
  node.append(bubble);
  return node;
}

// What became of an action: the service's sentence, with its amount kept on one line.
function recordNode(item) {
  const node = el("li", { class: `record ${item.outcome}` });
  const line = el("p");
  const at = item.amount ? item.text.indexOf(item.amount) : -1;
  if (at >= 0) {
    line.append(item.text.slice(0, at));
    line.append(el("span", { class: "nowrap" }, item.amount));
    line.append(item.text.slice(at + item.amount.length));
  } else {
    line.textContent = item.text;
  }
  node.append(line);
  if (item.result && item.outcome === "approved" && !item.text.includes(item.result)) {
    node.append(el("p", { class: "help" }, item.result));
  }
  return node;
}

function problemNode(text, retry) {
  const node = el("li", { class: "problem" });
  node.append(el("p", {}, text));
  if (retry) {
    const button = el("button", { type: "button", class: "secondary" }, "Send again");
    button.addEventListener("click", () => {
      node.remove();
      sendText(retry, { echo: true });
    });
    node.append(button);
  }
  return addToLog(node, null);
}

function scrollToEnd(force = false) {
  const scroller = $("scroller");
  if (force || state.stick) scroller.scrollTop = scroller.scrollHeight;
}

function setStatus(text) {
  $("status").textContent = text;
}

function setConnection(text) {
  $("connection").textContent = text;
  $("connection").classList.toggle("active", Boolean(text));
}

// Said once to screen readers (the log itself is not a live region).
function announce(text) {
  const region = $("announcer");
  region.textContent = "";
  setTimeout(() => {
    region.textContent = text;
  }, 50);
}

// --- turns -----------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  if (!busy && state.syncing === state.visit) rebase(state.conversationId, state.visit);
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  $("stop").disabled = false;
  $("message").setAttribute("aria-busy", String(busy));
  for (const button of document.querySelectorAll(".approval button")) {
    if (busy) button.disabled = true;
  }
  if (!busy && document.activeElement === document.body) $("message").focus();
}

// Read an event stream until it ends; return whether the turn finished and the last id.
async function readStream(response, turn) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (turn.visit !== state.visit) {
          reader.cancel().catch(() => {});
          return;
        }
        handleBlock(block, turn);
      }
    }
  } catch (_) {
    // the connection dropped: the caller reconnects
  }
}

function handleBlock(block, turn) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (!data.length) return;
  let payload;
  try {
    payload = JSON.parse(data.join("\n"));
  } catch (_) {
    return;
  }
  if (id) turn.lastId = id;
  handleEvent(event, payload, turn);
}

function handleEvent(event, payload, turn) {
  switch (event) {
    case "token": {
      const key = `m:${payload.message_id || `live-${turn.number}`}`;
      let node = findKey(key);
      if (node && node.dataset.final) return; // the whole message is on screen already
      if (!node) node = addToLog(assistantNode(payload.label, null, ""), key);
      node.querySelector(".bubble").textContent += payload.text;
      showHandler(payload.label);
      scrollToEnd();
      return;
    }
    case "message": {
      const key = `m:${payload.id || `live-${turn.number}`}`;
      const live = payload.id && !findKey(key) ? findKey(`m:live-${turn.number}`) : null;
      if (live) live.dataset.key = key;
      const node = addToLog(assistantNode(payload.label, payload.html, null), key);
      showHandler(payload.label);
      const said = node.querySelector(".bubble").textContent.replace(/\s+/g, " ").trim();
      announce(`${payload.label ? `Assistant (${payload.label})` : "Assistant"}: ${said}`);
      return;
    }
    case "status":
      setStatus(payload.text);
      return;
    case "record": {
      const item = payload.item;
      if (item.type === "customer" && turn.text !== null) {
        // This page sent it and shows it already: give that bubble the history's key.
        const echo = [...document.querySelectorAll("#log .customer:not([data-key])")].pop();
        if (echo && item.id) echo.dataset.key = `c:${item.id}`;
        return;
      }
      drawItem(item);
      return;
    }
    case "pending":
      showPending(payload.actions);
      return;
    case "done":
      turn.finished = true;
      showHandler(payload.label);
      setStatus(payload.pending_actions ? waitingText() || WAITING_FOR_YOU : "");
      return;
    case "error":
      turn.finished = true;
      setStatus("");
      if (payload.kind === "stopped") {
        addToLog(el("li", { class: "notice" }, payload.detail), null);
      } else {
        const retry = ["model", "unexpected", "cancelled"].includes(payload.kind) ? turn.text : null;
        problemNode(payload.detail, retry);
      }
      announce(payload.detail);
      return;
    default:
  }
}

// Follow the turn of `id` until it is over, reconnecting with backoff while the service
// cannot be reached; a turn that runs on another server is waited for by asking.
async function follow(id, turn, visit) {
  const current = turn || { number: state.liveCounter++, lastId: null, finished: false, visit, text: null };
  let delay = 1000;
  let reconnecting = false;
  while (visit === state.visit && !current.finished) {
    let response = null;
    try {
      const headers = { Accept: "text/event-stream" };
      if (current.lastId) headers["Last-Event-ID"] = current.lastId;
      response = await api(`/conversations/${encodeURIComponent(id)}/events`, { headers });
    } catch (error) {
      if (!(error instanceof Offline)) return;
    }
    if (visit !== state.visit) return;
    if (response && response.status === 200) {
      if (reconnecting) setConnection("Reconnected.");
      reconnecting = false;
      delay = 1000;
      await readStream(response, current);
      if (current.finished) {
        setConnection("");
        break;
      }
    } else if (response && response.status === 204) {
      // Not running on this server: done, or running on another one (ask again later).
      const busy = await stillBusy(id);
      if (busy === false) {
        setConnection("");
        setStatus("");
        current.finished = true;
        await reloadConversation(id);
        return;
      }
      if (busy === true) {
        setConnection("");
        setStatus("The assistant is answering (the reply appears when it is ready)…");
        await sleep(ELSEWHERE_POLL_MS);
        continue;
      }
    } else if (response && response.status === 404) {
      setConnection("");
      return;
    }
    reconnecting = true;
    setConnection(`Connection lost. Reconnecting in ${Math.round(delay / 1000)} s…`);
    await sleep(delay);
    delay = Math.min(delay * 2, MAX_BACKOFF_MS);
    if (visit === state.visit) setConnection("Connection lost. Reconnecting…");
  }
  if (visit === state.visit) setTimeout(() => visit === state.visit && $("connection").textContent === "Reconnected." && setConnection(""), 2500);
}

async function stillBusy(id) {
  try {
    const response = await api(`/conversations/${encodeURIComponent(id)}`);
    if (!response.ok) return null;
    return (await response.json()).busy;
  } catch (_) {
    return null;
  }
}

// Start a turn with a POST; return whether the service accepted it.
async function runTurn(path, body, text) {
  const visit = state.visit;
  const turn = { number: state.liveCounter++, lastId: null, finished: false, visit, text };
  setBusy(true);
  setStatus("The assistant is writing…");
  let response;
  try {
    response = await api(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
  } catch (error) {
    setBusy(false);
    setStatus("");
    const offline = error instanceof Offline;
    // Lost on the way: the service may have taken it. The caller finds out once back.
    return { accepted: false, unknown: offline, problem: offline ? NO_CONNECTION : error.message };
  }
  if (!response.ok) {
    const problem = await readProblem(response);
    setBusy(false);
    setStatus("");
    return { accepted: false, problem, status: response.status };
  }
  await readStream(response, turn);
  if (!turn.finished && visit === state.visit) await follow(state.conversationId, turn, visit);
  if (visit === state.visit) {
    setBusy(false);
    refreshConversations(); // setBusy(false) read who has it now (`rebase`)
  }
  return { accepted: true };
}

function customerCount() {
  return document.querySelectorAll("#log .customer:not(.not-sent)").length;
}

// A message whose request broke on the way: wait for the service (following the turn it
// may have started), then show the history; if the message is not in it, it stays
// marked not sent, with Retry.
async function settleUnknown(id, text, visit, before) {
  setBusy(true);
  await follow(id, null, visit);
  if (visit !== state.visit) return;
  await reloadConversation(id);
  setBusy(false);
  const customers = [...document.querySelectorAll("#log .customer .bubble")];
  const arrived = customers.length > before && customers[customers.length - 1].textContent === text;
  if (!arrived) markNotSent(customerBubble(text), text, "");
}

function customerBubble(text) {
  const node = el("li", { class: "customer" });
  node.append(el("span", { class: "visually-hidden" }, "You: "));
  node.append(el("p", { class: "bubble" }, text));
  return addToLog(node, null);
}

function markNotSent(node, text, problem) {
  node.classList.add("not-sent");
  const note = el("p", { class: "not-sent-note" });
  note.append(el("span", {}, problem ? `Not sent. ${problem} ` : "Not sent. "));
  const retry = el("button", { type: "button", class: "secondary" }, "Retry");
  retry.addEventListener("click", () => {
    if (state.busy) return; // still finding out what became of it
    node.remove();
    sendText(text, { echo: true });
  });
  note.append(retry);
  node.append(note);
  retry.focus();
}

async function sendText(text, { echo }) {
  if (state.busy) return;
  let id;
  const node = echo ? customerBubble(text) : null;
  try {
    id = await ensureConversation();
  } catch (error) {
    if (node) markNotSent(node, text, error instanceof Offline ? NO_CONNECTION : error.message);
    return;
  }
  if (!state.conversations.some((c) => c.conversation_id === id)) setHeading(text.slice(0, 80));
  showPending([]);
  const visit = state.visit;
  const before = customerCount() - (node ? 1 : 0);
  const result = await runTurn(`/conversations/${encodeURIComponent(id)}/messages`, { text }, text);
  if (!result.accepted && node) markNotSent(node, text, result.problem);
  if (result.unknown) await settleUnknown(id, text, visit, before);
  if (result.accepted && !state.pending.length && state.conversationId === id) $("message").focus();
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
  // What the customer approved and our team checks stays as it is whatever they write
  // (the card's Withdraw drops it); an action still theirs to decide comes first.
  const theirs = state.pending.some((a) => !a.check);
  if (theirs && !state.overridePending) {
    showWarning();
    return;
  }
  state.overridePending = false;
  hideWarning();
  box.value = "";
  await sendText(text, { echo: true });
}

function showWarning() {
  $("pending-warning-text").textContent =
    "An action above is waiting for your decision. If you send this message now, that action will not be done.";
  $("back-to-decision").textContent = "Back to the decision";
  $("pending-warning").hidden = false;
  $("send-anyway").focus();
}

function hideWarning() {
  $("pending-warning").hidden = true;
}

async function stop() {
  const id = state.conversationId;
  if (!id) return;
  $("stop").disabled = true;
  setStatus("Stopping…");
  try {
    const response = await api(`/conversations/${encodeURIComponent(id)}/stop`, { method: "POST" });
    if (!response.ok) setStatus(await readProblem(response));
  } catch (error) {
    setStatus(error instanceof Offline ? `${NO_CONNECTION} Try again.` : GENERIC_PROBLEM);
    $("stop").disabled = false;
  }
  $("message").focus();
}

// --- approvals -------------------------------------------------------------------------

function showPending(actions) {
  state.pending = actions;
  state.decisions.clear();
  const region = $("approvals");
  region.replaceChildren();
  region.hidden = actions.length === 0;
  actions.forEach((action, index) => region.append(approvalCard(action, index, actions.length)));
  if (!actions.length) hideWarning();
  const heading = region.querySelector("h3");
  if (heading) {
    scrollToEnd(true);
    heading.focus();
  }
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
  if (action.check) return checkCard(action, id, counter);
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
  // The reason goes to whoever proposed the action: the assistant, or a person by name.
  const proposer = action.proposed_by || "the assistant";
  decision.append(el("label", { for: reasonId }, `Reason if you decline (optional, passed to ${proposer})`));
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

// An action the customer approved that a member of staff checks too (a second approval
// above an amount): nothing to decide here, the page waits for them.
function checkCard(action, id, counter) {
  const preview = action.preview;
  const card = el("article", {
    class: `approval checking ${action.check.status}`,
    "aria-labelledby": `approval-${id}`,
    "data-tool-call-id": action.tool_call_id,
  });
  const heading = action.check.status === "waiting" ? "Waiting for a check" : "Checked";
  card.append(el("h3", { id: `approval-${id}`, tabindex: "-1" }, `${heading}${counter}: ${preview.title}`));
  const lines = preview.amount ? preview.lines.slice(0, -1) : preview.lines;
  const list = el("ul", { class: "preview-lines" });
  for (const line of lines) list.append(el("li", {}, line));
  card.append(list);
  if (preview.amount) card.append(el("p", { class: `amount ${preview.amount_kind || ""}` }, preview.amount));
  card.append(el("p", { class: "chosen" }, action.check.text));
  if (action.check.status === "waiting") {
    // Withdrawing is the customer's own act, never a side effect of writing.
    const buttons = el("div", { class: "buttons" });
    const withdraw = el("button", { type: "button", class: "decline" }, "Withdraw");
    withdraw.addEventListener("click", () => withdrawActions(withdraw));
    buttons.append(withdraw);
    card.append(buttons);
  }
  return card;
}

async function withdrawActions(button) {
  const id = state.conversationId;
  if (!id || state.busy) return;
  button.disabled = true;
  try {
    const response = await api(`/conversations/${encodeURIComponent(id)}/withdraw`, { method: "POST" });
    if (id !== state.conversationId) return;
    if (!response.ok) {
      setStatus(await readProblem(response));
      button.disabled = false;
      return;
    }
    const done = await response.json();
    await reloadConversation(id);
    setStatus(done.text);
  } catch (error) {
    setStatus(error instanceof Offline ? `${NO_CONNECTION} Try again.` : GENERIC_PROBLEM);
    button.disabled = false;
  }
}

// Staff decided every check of the actions on screen: the service goes on with them at
// once, as a turn that the next look finds running and follows. The checks' outcome is
// said once; should nobody have gone on with them at the look after (the service stopped
// in between), this tab goes on with them.
async function goOnChecked(id, visit) {
  const checks = state.pending.map((a) => a.check).filter(Boolean);
  if (!checks.length || checks.some((c) => c.status === "waiting")) return;
  if (state.checked !== state.pending) {
    state.checked = state.pending;
    announce(checks.map((c) => c.text).join(" ")); // the service's words
    return;
  }
  const answered = state.pending;
  const result = await runTurn(`/conversations/${encodeURIComponent(id)}/resume`, {}, null);
  if (visit !== state.visit) return;
  if (!result.accepted) {
    // Another window went on with it, or it was dropped: show the conversation as it is.
    await reloadConversation(id);
  } else if (state.pending === answered) {
    showPending([]); // what became of them is in the log from now on
  }
}

async function choose(action, card, approved, reason) {
  if (state.busy) return;
  const text = reason.trim();
  state.decisions.set(action.tool_call_id, { tool_call_id: action.tool_call_id, approved, reason: text || null });
  for (const control of card.querySelectorAll("button, input")) control.disabled = true;
  card.append(el("p", { class: "chosen" }, approved ? "You approved this." : "You declined this."));
  if (state.decisions.size < state.pending.length) {
    setStatus("Decide the other actions too, then the assistant goes on.");
    const next = [...document.querySelectorAll(".approval")].find((c) => !state.decisions.has(c.dataset.toolCallId));
    if (next) next.querySelector("h3").focus();
    return;
  }
  hideWarning();
  const decisions = [...state.decisions.values()];
  const id = state.conversationId;
  const answered = state.pending;
  $("message").focus();
  const result = await runTurn(`/conversations/${encodeURIComponent(id)}/decisions`, { decisions }, null);
  if (id !== state.conversationId) return;
  if (!result.accepted) {
    setStatus(result.problem);
    for (const control of card.querySelectorAll("button, input")) control.disabled = false;
    card.querySelector(".chosen")?.remove();
    state.decisions.clear();
    showPending(answered);
    return;
  }
  // The cards are answered: what became of them is in the log from now on.
  if (state.pending === answered) showPending([]);
  if (!state.pending.length) $("message").focus();
}

// --- a person from customer service ------------------------------------------------------

function showPerson(person) {
  state.person = person && person.status !== "assistant" ? person : null;
  const line = $("person");
  line.hidden = !state.person;
  line.textContent = state.person ? state.person.text : "";
  const button = $("ask-person");
  $("leave-queue").hidden = !(state.person && state.person.status === "waiting");
  if (state.person) closePersonForm();
  button.disabled = Boolean(state.person);
  button.textContent = !state.person
    ? "Talk to a person"
    : state.person.status === "waiting"
      ? "Waiting for a person"
      : `With ${state.person.agent}`;
  showHandler();
}

// Show who has the conversation as the service says (`person`, its state). Handed back
// to the assistant: the service's words say so in the log. `others`: the change was
// made elsewhere (a person, another tab), and is said to screen readers.
function showPersonChange(person, others) {
  const before = state.person;
  state.seen.person = personKey(person);
  if (person.status === "assistant") {
    if (!before) return; // not when this page left the queue itself
    showPerson(null);
    addToLog(el("li", { class: "notice" }, person.text), null);
    announce(person.text);
    return;
  }
  if (others && (!before || before.status !== person.status)) announce(person.text);
  showPerson(person);
}

// Read `what` of conversation `id` ("": its summary) for the visit on screen: null when
// offline, refused, or when the page has moved on or a turn runs (the turn's own stream
// draws then).
async function readForVisit(id, what, visit) {
  const current = () => visit === state.visit && !state.busy;
  let response;
  try {
    response = await api(`/conversations/${encodeURIComponent(id)}${what ? `/${what}` : ""}`);
  } catch (_) {
    return null;
  }
  if (!response.ok || !current()) return null;
  let body;
  try {
    body = await response.json();
  } catch (_) {
    return null; // cut mid-answer: as offline
  }
  return current() ? body : null;
}

// Draw the saved history again, and the cards: what others did meanwhile. Return whether
// both were read.
async function redrawHistory(id, visit) {
  const history = await readForVisit(id, "messages", visit);
  if (!history) return false;
  const { items } = history;
  const before = $("log").children.length;
  // This tab's own lines that were never saved: a message not sent, a problem with its
  // "Send again".
  const unsent = [...$("log").querySelectorAll(".not-sent, .problem")];
  $("log").replaceChildren();
  for (const item of items) drawItem(item);
  for (const node of unsent) $("log").append(node);
  const drawn = await redrawPending(id, visit);
  const last = items[items.length - 1];
  if (items.length > before && last && last.type === "assistant" && last.person) {
    announce(`${last.person} (customer service): ${last.text}`);
  }
  scrollToEnd();
  return drawn;
}

// An action a person proposed (or one decided elsewhere, or its check): the cards follow
// the service. Return whether they were read.
async function redrawPending(id, visit) {
  const pending = await readForVisit(id, "pending", visit);
  if (!pending) return false;
  const { actions } = pending;
  const ids = (list) => JSON.stringify(list.map((a) => [a.tool_call_id, a.check && a.check.status]));
  if (ids(actions) !== ids(state.pending)) showPending(actions);
  return true;
}

// "Talk to a person" opens a short form: what it is about, which the person reads first.
function openPersonForm() {
  if (state.person) return;
  $("person-form").hidden = false;
  $("ask-person").setAttribute("aria-expanded", "true");
  $("person-reason").focus();
}

function closePersonForm() {
  $("person-form").hidden = true;
  $("ask-person").setAttribute("aria-expanded", "false");
}

async function leaveQueue() {
  const id = state.conversationId;
  if (!id) return;
  const visit = state.visit;
  let response;
  try {
    response = await api(`/conversations/${encodeURIComponent(id)}/person`, { method: "DELETE" });
  } catch (error) {
    setStatus(error instanceof Offline ? NO_CONNECTION : GENERIC_PROBLEM);
    return;
  }
  if (visit !== state.visit) return;
  if (!response.ok) {
    setStatus(await readProblem(response));
    return;
  }
  const person = await response.json();
  showPerson(null);
  addToLog(el("li", { class: "notice" }, person.text), null);
  announce(person.text);
  scrollToEnd(true);
  $("message").focus();
  rebase(id, visit); // this tab's own doing: not drawn again as another's
}

async function askForPerson(reason = "") {
  if (state.busy) {
    setStatus("Wait for the reply (or stop it), then ask for a person.");
    return;
  }
  let id;
  try {
    id = await ensureConversation();
  } catch (error) {
    setStatus(error instanceof Offline ? NO_CONNECTION : error.message);
    return;
  }
  const visit = state.visit;
  let response;
  try {
    response = await api(`/conversations/${encodeURIComponent(id)}/person`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ reason }),
    });
  } catch (error) {
    setStatus(error instanceof Offline ? NO_CONNECTION : GENERIC_PROBLEM);
    return;
  }
  if (visit !== state.visit) return;
  if (!response.ok) {
    setStatus(await readProblem(response));
    return;
  }
  const person = await response.json();
  setStatus("");
  closePersonForm();
  $("person-reason").value = "";
  await redrawHistory(id, visit);
  announce(person.text);
  refreshConversations();
  showPersonChange(person, false);
  scrollToEnd(true); // the newest message in view, and the banner that says who comes
  $("person").focus();
  rebase(id, visit); // this tab's own doing: not drawn again as another's
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
  $("new-conversation").addEventListener("click", () => {
    closeMenu();
    showNewConversation({ push: true });
  });
  $("composer").addEventListener("submit", send);
  $("stop").addEventListener("click", stop);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && state.wake) state.wake();
  });
  $("ask-person").addEventListener("click", openPersonForm);
  $("person-cancel").addEventListener("click", () => {
    closePersonForm();
    $("ask-person").focus();
  });
  $("person-form").addEventListener("submit", (event) => {
    event.preventDefault();
    askForPerson($("person-reason").value.trim());
  });
  $("leave-queue").addEventListener("click", leaveQueue);
  $("send-anyway").addEventListener("click", () => {
    state.overridePending = true;
    $("composer").requestSubmit();
  });
  $("back-to-decision").addEventListener("click", () => {
    hideWarning();
    const heading = document.querySelector(".approval h3");
    if (heading) heading.focus();
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !coarse()) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("menu").addEventListener("click", () => {
    if ($("chat").classList.contains("menu-open")) closeMenu();
    else openMenu();
  });
  $("close-menu").addEventListener("click", closeMenu);
  $("backdrop").addEventListener("click", closeMenu);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeMenu();
  });
  $("scroller").addEventListener("scroll", () => {
    const scroller = $("scroller");
    state.stick = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60;
  });
  window.addEventListener("popstate", () => {
    if (!state.token) return;
    const id = conversationFromPath();
    if (id) openConversation(id, { push: false });
    else showNewConversation({ push: false });
  });
  // A link with a token opened in a tab that already shows the page.
  window.addEventListener("hashchange", () => {
    const token = tokenFromFragment();
    if (token) signIn(token);
  });
  window.addEventListener("resize", () => {
    if (!narrow()) closeMenu();
  });
  const token = tokenFromFragment() || sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else signOut("");
}

document.addEventListener("DOMContentLoaded", start);
