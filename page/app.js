// plait's page: lists, items and devices of the agent that serves it, live from its event stream.
//
// Rules this file keeps (DESIGN §12):
// - Every text that comes from the data (item texts, list titles, device names set by peers, error messages)
//   reaches the DOM through textContent, createTextNode or setAttribute, never through HTML parsing. There is
//   no innerHTML, outerHTML, insertAdjacentHTML or document.write in this file, and none may be added.
// - No inline script or style (the Content-Security-Policy forbids them); list colors are set through the CSSOM.
// - Every change goes through POST /api/edit (or the other POST endpoints) with a JSON body; a GET changes nothing.
"use strict";

(() => {
  const state = {
    show: null, // ShowOutput: {lists: [{id, title, color, pending: [{id, text}], completed: [...]}]}
    peers: null, // PeersOutput
    pending: null, // PendingPeersOutput
    pairing: null, // {devices, session} or null when the agent has no pairing endpoints
    status: null, // StatusOutput
    editing: null, // {kind: "item"|"list", id, value} while an inline edit is open
    drafts: new Map(), // list id -> text typed in its "add an item" field
    progress: new Map(), // device id -> latest sync.progress data (for "missing N")
    lastSeq: 0,
    epoch: null,
    dragItem: null,
  };

  const $ = (id) => document.getElementById(id);

  // MARK: DOM helpers (text only)

  /// Creates an element; `children` are nodes or strings, strings become text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function button(label, onclick, props) {
    return el("button", Object.assign({ type: "button", onclick }, props || {}), label);
  }

  function replaceChildren(parent, children) {
    while (parent.firstChild) parent.removeChild(parent.firstChild);
    for (const child of children) parent.appendChild(child);
  }

  // MARK: Talking to the agent

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // The session's page key. Signing in sets an HttpOnly cookie and answers this second secret; the agent accepts a
  // session only with both. Browsers send a host's cookies to every port of it, so another local user's server on
  // another port of 127.0.0.1 that this browser visits receives the cookie; storage is kept per origin (scheme,
  // host and port), so that server never sees the key. localStorage, not sessionStorage: a session then survives
  // closing the tab and serves a bookmark or a second tab, as the cookie does for its 7 days (sessionStorage would
  // send the user back to `plait gui` for every new tab).
  const pageKeyName = "plait-page-key";

  function pageKey() {
    try {
      return localStorage.getItem(pageKeyName);
    } catch (error) {
      return null; // Storage blocked: the API answers 401 and the page asks to sign in.
    }
  }

  /// Keeps the key of a new session; throws (with a sentence for the page) when the browser keeps no site data.
  function keepPageKey(answer) {
    try {
      localStorage.setItem(pageKeyName, String(answer && answer.page_key));
    } catch (error) {
      throw new APIError(0, "This browser does not let the page keep its sign-in key (site data is blocked " +
        "for this address); allow site data for it and sign in again.");
    }
  }

  /// GET or POST (JSON) to the agent; answers the parsed JSON (or null for 204). A 401 shows the sign-in note.
  async function api(method, path, body) {
    const init = { method, credentials: "same-origin", cache: "no-store", headers: {} };
    const key = pageKey();
    if (key) init.headers["Plait-Page-Key"] = key;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      throw new APIError(0, "The agent did not answer; is `plait agent` still running?");
    }
    if (response.status === 204) return null;
    let parsed = null;
    const text = await response.text();
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch (error) {
      parsed = null;
    }
    if (!response.ok) {
      const message =
        parsed && typeof parsed.error === "string" ? parsed.error : `${method} ${path}: ${response.status}`;
      if (response.status === 401) showLogin(message);
      throw new APIError(response.status, message);
    }
    return parsed;
  }

  function showProblem(message) {
    const problem = $("problem");
    problem.textContent = message;
    problem.hidden = !message;
  }

  function setConnection(text, mood) {
    const node = $("connection");
    node.textContent = text;
    node.className = "connection" + (mood ? " " + mood : "");
  }

  function showLogin(message) {
    $("app").hidden = true;
    $("login").hidden = false;
    // Over HTTPS (another machine) the password signs in; on loopback a code from `plait gui` does.
    const remote = location.protocol === "https:";
    $("password-form").hidden = !remote;
    if (message) {
      $("login-message").textContent =
        message + (remote ? "" : " Run `plait gui` and open the address it prints.");
    } else if (remote) {
      $("login-message").textContent = "Type the password of this device's page (check first that the " +
        "certificate fingerprint your browser shows is the one `plait gui` prints there).";
    }
    setConnection("Signed out", "down");
    stopEvents();
  }

  /// Runs a change and reports a refusal (the CLI's own sentence) on the page; the event stream brings the result.
  async function edit(body) {
    try {
      const result = await api("POST", "/api/edit", body);
      showProblem("");
      // The stream will say so too; refreshing now keeps the page right even if the stream is behind.
      scheduleRefresh(["show"]);
      return result;
    } catch (error) {
      showProblem(error.message);
      return null;
    }
  }

  async function post(path, body) {
    try {
      const result = await api("POST", path, body);
      showProblem("");
      return result;
    } catch (error) {
      showProblem(error.message);
      return null;
    }
  }

  // MARK: Loading and refreshing

  const loaders = {
    status: async () => {
      state.status = await api("GET", "/api/status");
    },
    show: async () => {
      state.show = await api("GET", "/api/show");
    },
    peers: async () => {
      state.peers = await api("GET", "/api/peers");
    },
    pending: async () => {
      state.pending = await api("GET", "/api/peers/pending");
    },
    pairing: async () => {
      try {
        state.pairing = await api("GET", "/api/pairing");
      } catch (error) {
        if (error.status === 404 || error.status === 405) state.pairing = null;
        else throw error;
      }
    },
  };
  const renderers = {
    status: renderStatus,
    show: renderLists,
    peers: renderDevices,
    pending: renderPending,
    pairing: renderPairing,
  };

  let refreshTimer = null;
  let refreshRunning = false;
  const refreshWanted = new Set();

  /// Coalesces the refreshes a burst of events asks for into one request per part.
  function scheduleRefresh(parts) {
    for (const part of parts) refreshWanted.add(part);
    if (refreshTimer === null) refreshTimer = setTimeout(runRefresh, 15);
  }

  async function runRefresh() {
    refreshTimer = null;
    if (refreshRunning) {
      refreshTimer = setTimeout(runRefresh, 15);
      return;
    }
    refreshRunning = true;
    const parts = [...refreshWanted];
    refreshWanted.clear();
    try {
      const before = parts.map((part) => JSON.stringify(state[part]));
      await Promise.all(parts.map((part) => loaders[part]()));
      // Unchanged data is not drawn again: a re-render costs the reader nothing, but a keyboard user's place
      // and an open edit are best left alone when nothing moved.
      parts.forEach((part, i) => {
        if (JSON.stringify(state[part]) !== before[i]) renderers[part]();
      });
    } catch (error) {
      if (error.status !== 401) showProblem(error.message);
    } finally {
      refreshRunning = false;
    }
  }

  // MARK: Rendering the lists

  /// Remembers which control has the focus (by its data-focus key) and the caret, to restore after a re-render.
  function saveFocus() {
    const active = document.activeElement;
    if (!active || !active.dataset || !active.dataset.focus) return null;
    const saved = { key: active.dataset.focus };
    if (typeof active.selectionStart === "number") {
      saved.start = active.selectionStart;
      saved.end = active.selectionEnd;
    }
    return saved;
  }

  function restoreFocus(saved) {
    if (!saved) return;
    for (const node of document.querySelectorAll("[data-focus]")) {
      if (node.dataset.focus !== saved.key) continue;
      node.focus();
      if (saved.start !== undefined && typeof node.setSelectionRange === "function") {
        node.setSelectionRange(saved.start, saved.end);
      }
      return;
    }
  }

  function renderLists() {
    const lists = (state.show && state.show.lists) || [];
    const saved = saveFocus();
    replaceChildren($("lists"), lists.map((list, index) => renderList(list, index, lists)));
    $("no-lists").hidden = lists.length > 0;
    restoreFocus(saved);
  }

  function renderList(list, index, lists) {
    const section = el("section", {
      class: "list",
      "aria-label": "List " + list.title,
      dataset: { list: list.id },
    });
    if (list.color) section.style.setProperty("--list-color", list.color);

    const head = el("div", { class: "list-head" });
    if (state.editing && state.editing.kind === "list" && state.editing.id === list.id) {
      head.appendChild(renameForm(list));
    } else {
      head.appendChild(el("h3", { class: "title", text: list.title }));
      head.appendChild(listTools(list, index, lists));
    }
    section.appendChild(head);

    const draftKey = "add:" + list.id;
    const input = el("input", {
      type: "text",
      name: "text",
      autocomplete: "off",
      "aria-label": "New item in " + list.title,
      placeholder: "Add an item",
      dataset: { focus: draftKey },
      oninput: (event) => state.drafts.set(list.id, event.target.value),
    });
    input.value = state.drafts.get(list.id) || "";
    const submit = el("button", { type: "submit", dataset: { focus: "add-submit:" + list.id } }, "Add");
    const form = el("form", { class: "inline-form add-item" }, input, submit);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = input.value;
      if (!text.trim()) return;
      // Cleared at once, so the next item can be typed while this one travels (events may re-render the list
      // meanwhile, so the field is looked up again); a refused text comes back into an empty field.
      state.drafts.delete(list.id);
      input.value = "";
      const done = await edit({ op: "add", list: list.id, text });
      const current = document.querySelector(`[data-focus="${CSS.escape(draftKey)}"]`);
      if (!done && current && current.value === "") {
        current.value = text;
        state.drafts.set(list.id, text);
      }
    });
    section.appendChild(form);

    const pending = el("ul", { class: "items pending", "aria-label": "To do in " + list.title });
    list.pending.forEach((item, i) => pending.appendChild(renderItem(list, item, i, list.pending, false)));
    section.appendChild(pending);

    if (list.completed.length > 0) {
      const details = el("details", { class: "completed", dataset: { completedOf: list.id } });
      if (openCompleted.has(list.id)) details.open = true;
      details.addEventListener("toggle", () => {
        if (details.open) openCompleted.add(list.id);
        else openCompleted.delete(list.id);
      });
      const count = `Done (${list.completed.length})`;
      details.appendChild(el("summary", { dataset: { focus: "completed:" + list.id } }, count));
      const completed = el("ul", { class: "items completed", "aria-label": "Done in " + list.title });
      list.completed.forEach((item, i) => completed.appendChild(renderItem(list, item, i, list.completed, true)));
      details.appendChild(completed);
      section.appendChild(details);
    }
    return section;
  }

  const openCompleted = new Set();

  function listTools(list, index, lists) {
    const tools = el("div", { class: "tools" });
    tools.appendChild(
      button("Rename", () => startEditing("list", list.id, list.title), {
        "aria-label": "Rename list " + list.title,
        dataset: { focus: "rename:" + list.id },
      }),
    );
    const color = el("input", {
      type: "color",
      "aria-label": "Color of list " + list.title,
      dataset: { focus: "color:" + list.id },
    });
    if (/^#[0-9a-fA-F]{6}$/.test(list.color || "")) color.value = list.color.toLowerCase();
    color.addEventListener("change", () => edit({ op: "list.recolor", list: list.id, color: color.value }));
    tools.appendChild(color);
    if (list.color) {
      tools.appendChild(
        button("No color", () => edit({ op: "list.recolor", list: list.id, color: "none" }), {
          "aria-label": "Clear the color of list " + list.title,
          dataset: { focus: "uncolor:" + list.id },
        }),
      );
    }
    tools.appendChild(
      button("↑", () => moveList(lists, index, -1), {
        class: "icon",
        disabled: index === 0,
        "aria-label": "Move list " + list.title + " up",
        dataset: { focus: "up:" + list.id },
      }),
    );
    tools.appendChild(
      button("↓", () => moveList(lists, index, +1), {
        class: "icon",
        disabled: index === lists.length - 1,
        "aria-label": "Move list " + list.title + " down",
        dataset: { focus: "down:" + list.id },
      }),
    );
    tools.appendChild(
      button(
        "Delete",
        () => {
          if (!confirm("Delete the list “" + list.title + "” and its items?")) return;
          edit({ op: "list.rm", list: list.id });
        },
        { class: "danger", "aria-label": "Delete list " + list.title, dataset: { focus: "rm:" + list.id } },
      ),
    );
    return tools;
  }

  function moveList(lists, index, step) {
    const target = index + step;
    if (target < 0 || target >= lists.length) return;
    const id = lists[index].id;
    // Up: after the one two above (or to the top); down: after the next one.
    if (step < 0) {
      if (target === 0) edit({ op: "list.move", list: id, top: true });
      else edit({ op: "list.move", list: id, after: lists[target - 1].id });
    } else {
      edit({ op: "list.move", list: id, after: lists[target].id });
    }
  }

  function renameForm(list) {
    return inlineEditForm({
      label: "New title for list " + list.title,
      focusKey: "editing:list:" + list.id,
      onsave: (value) => edit({ op: "list.rename", list: list.id, title: value }),
    });
  }

  function startEditing(kind, id, value) {
    state.editing = { kind, id, value };
    renderLists();
    const input = document.querySelector(`[data-focus="editing:${kind}:${CSS.escape(id)}"]`);
    if (input) {
      input.focus();
      input.select();
    }
  }

  function stopEditing() {
    const wasEditing = state.editing;
    state.editing = null;
    renderLists();
    if (wasEditing) {
      const key = (wasEditing.kind === "list" ? "rename:" : "edit:") + wasEditing.id;
      const node = document.querySelector(`[data-focus="${CSS.escape(key)}"]`);
      if (node) node.focus();
    }
  }

  /// A text field with Save and Cancel; Escape cancels. Keeps its typed value across re-renders.
  function inlineEditForm({ label, focusKey, onsave }) {
    const input = el("input", {
      type: "text",
      "aria-label": label,
      autocomplete: "off",
      dataset: { focus: focusKey },
      oninput: (event) => {
        if (state.editing) state.editing.value = event.target.value;
      },
      onkeydown: (event) => {
        if (event.key === "Escape") {
          event.preventDefault();
          stopEditing();
        }
      },
    });
    input.value = state.editing ? state.editing.value : "";
    const form = el(
      "form",
      { class: "inline-form edit-form" },
      input,
      el("button", { type: "submit", class: "primary", dataset: { focus: focusKey + ":save" } }, "Save"),
      button("Cancel", stopEditing, { dataset: { focus: focusKey + ":cancel" } }),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const value = input.value;
      if (!value.trim()) return;
      const result = await onsave(value);
      if (result) stopEditing();
    });
    return form;
  }

  function renderItem(list, item, index, items, done) {
    const li = el("li", { class: "item" + (done ? " done" : ""), dataset: { item: item.id } });
    if (state.editing && state.editing.kind === "item" && state.editing.id === item.id) {
      li.appendChild(
        inlineEditForm({
          label: "New text for " + item.text,
          focusKey: "editing:item:" + item.id,
          onsave: (value) => edit({ op: "edit", item: item.id, text: value }),
        }),
      );
      return li;
    }
    li.appendChild(
      button(done ? "Reopen" : "Done", () => edit({ op: done ? "reopen" : "done", item: item.id }), {
        "aria-label": (done ? "Reopen " : "Mark done ") + item.text,
        dataset: { focus: (done ? "reopen:" : "done:") + item.id },
      }),
    );
    li.appendChild(el("span", { class: "text", text: item.text }));
    const tools = el("span", { class: "tools" });
    tools.appendChild(
      button("Edit", () => startEditing("item", item.id, item.text), {
        "aria-label": "Edit " + item.text,
        dataset: { focus: "edit:" + item.id },
      }),
    );
    if (!done) {
      tools.appendChild(
        button("↑", () => moveItem(items, index, -1), {
          class: "icon",
          disabled: index === 0,
          "aria-label": "Move " + item.text + " up",
          dataset: { focus: "up:" + item.id },
        }),
      );
      tools.appendChild(
        button("↓", () => moveItem(items, index, +1), {
          class: "icon",
          disabled: index === items.length - 1,
          "aria-label": "Move " + item.text + " down",
          dataset: { focus: "down:" + item.id },
        }),
      );
      makeDraggable(li, list, item);
    }
    tools.appendChild(
      button("Delete", () => edit({ op: "rm", item: item.id }), {
        class: "danger",
        "aria-label": "Delete " + item.text,
        dataset: { focus: "rm:" + item.id },
      }),
    );
    li.appendChild(tools);
    return li;
  }

  function moveItem(items, index, step) {
    const target = index + step;
    if (target < 0 || target >= items.length) return;
    const id = items[index].id;
    if (step < 0) {
      if (target === 0) edit({ op: "move", item: id, top: true });
      else edit({ op: "move", item: id, after: items[target - 1].id });
    } else {
      edit({ op: "move", item: id, after: items[target].id });
    }
  }

  /// Drag an open item onto another (it goes after it) or onto a list's header (it goes to the top there).
  /// The buttons do the same for keyboards and touch screens; dragging is a convenience for a mouse.
  function makeDraggable(li, list, item) {
    li.draggable = true;
    li.addEventListener("dragstart", (event) => {
      state.dragItem = item.id;
      li.classList.add("dragging");
      event.dataTransfer.effectAllowed = "move";
      event.dataTransfer.setData("text/plain", item.text);
    });
    li.addEventListener("dragend", () => {
      state.dragItem = null;
      li.classList.remove("dragging");
    });
    li.addEventListener("dragover", (event) => {
      if (!state.dragItem || state.dragItem === item.id) return;
      event.preventDefault();
      li.classList.add("drop-target");
    });
    li.addEventListener("dragleave", () => li.classList.remove("drop-target"));
    li.addEventListener("drop", (event) => {
      event.preventDefault();
      li.classList.remove("drop-target");
      const dragged = state.dragItem;
      state.dragItem = null;
      if (!dragged || dragged === item.id) return;
      edit({ op: "move", item: dragged, after: item.id });
    });
  }

  // MARK: Rendering devices

  function renderStatus() {
    const status = state.status;
    $("device-name").textContent = status ? status.name : "";
    document.title = status ? "plait · " + status.name : "plait";
  }

  function shortID(id) {
    return typeof id === "string" ? id.slice(0, 7) : "";
  }

  /// The words for a peer's state: diverged and forked first (they need a person), then in sync or missing N.
  function peerState(peer) {
    if (peer.refused) return { text: "refused: " + peer.refused, mood: "refused" };
    if (peer.diverged) return { text: "diverged", mood: "diverged" };
    if (Array.isArray(peer.forked) && peer.forked.length > 0) return { text: "forked", mood: "forked" };
    if (peer.in_sync) return { text: "in sync", mood: "in-sync" };
    const missing = typeof peer.missing === "number" ? peer.missing : (state.progress.get(peer.device) || {}).missing;
    if (typeof missing === "number" && missing > 0) return { text: "missing " + missing, mood: "missing" };
    return { text: peer.state ? String(peer.state) : "not in sync", mood: "missing" };
  }

  function when(iso) {
    if (!iso) return "never";
    const date = new Date(iso);
    return isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  }

  function renderDevices() {
    const peers = (state.peers && state.peers.peers) || [];
    const saved = saveFocus();
    replaceChildren(
      $("devices"),
      peers.map((peer) => {
        const status = peerState(peer);
        const card = el("li", { class: "device-card", dataset: { device: peer.device } });
        card.appendChild(el("div", {}, el("span", { class: "name", text: peer.name }), " ",
          el("span", { class: "state " + status.mood, text: status.text })));
        card.appendChild(el("div", { class: "id", title: peer.device, text: peer.device }));
        const meta = ["last seen " + when(peer.last_seen)];
        if (peer.address) meta.push(peer.address);
        if (peer.diverged) meta.push("diverged: " + peer.diverged);
        if (peer.succeeded_by) meta.push("replaced by " + shortID(peer.succeeded_by));
        card.appendChild(el("div", { class: "meta", text: meta.join(" · ") }));
        return card;
      }),
    );
    $("no-devices").hidden = peers.length > 0;
    restoreFocus(saved);
  }

  function renderPending() {
    const pending = (state.pending && state.pending.pending) || [];
    const saved = saveFocus();
    replaceChildren(
      $("pending"),
      pending.map((device) => {
        const card = el("li", { class: "device-card", dataset: { device: device.device } });
        // A pending device's name is its own unverified claim: say so.
        card.appendChild(el("div", {}, "calls itself ", el("span", { class: "name", text: device.name })));
        card.appendChild(el("div", { class: "id", title: device.device, text: device.device }));
        const meta = ["last seen " + when(device.last_seen), device.attempts + " attempts"];
        if (device.address) meta.push(device.address);
        card.appendChild(el("div", { class: "meta", text: meta.join(" · ") }));
        card.appendChild(
          button(
            "Trust",
            async () => {
              if (!confirm("Trust device " + device.device + "? Only if you know it is yours.")) return;
              if ((await post("/api/trust", { device: device.device })) !== null) {
                scheduleRefresh(["peers", "pending"]);
              }
            },
            { class: "primary", "aria-label": "Trust " + device.name, dataset: { focus: "trust:" + device.device } },
          ),
        );
        return card;
      }),
    );
    $("no-pending").hidden = pending.length > 0;
    restoreFocus(saved);
  }

  // The session state last drawn, so that a pairing that ends in "paired" reads the devices again once.
  let pairingShownState = null;
  // What is typed in the pairing address field (the section is drawn again while an attempt moves on).
  let pairingDraft = "";

  // A pairing attempt is running in these states; in the others (paired, refused, failed) it has ended.
  const pairingRunning = ["searching", "connecting", "comparing", "confirmed"];
  const pairingWords = {
    searching: "looking for devices in pairing mode nearby…",
    connecting: "connecting…",
    comparing: "compare the codes",
    confirmed: "confirmed here; waiting for the other device's answer…",
    paired: "paired.",
    refused: "refused; nothing was trusted.",
    failed: "failed; nothing was trusted.",
  };

  function renderPairing() {
    const root = $("pairing");
    const saved = saveFocus();
    const children = [];
    const pairing = state.pairing;
    const session = pairing && pairing.session;
    const running = !!session && pairingRunning.includes(session.state);
    if (!pairing) {
      children.push(el("p", { class: "empty", text: "Pairing from the page is not available; use `plait pair`." }));
    } else if (session) {
      // The name is the other device's own claim (shown as text); the ID is what pairing verifies.
      const name = session.name || (session.device ? deviceName(session.device) : "a device");
      const words = pairingWords[session.state] || String(session.state || "");
      children.push(
        el("p", { class: "pairing-state", dataset: { pairingState: String(session.state || "") } },
          "Pairing with ", el("span", { class: "name", text: name }), ": ", words),
      );
      // An error while searching is why a pick was not used (that device left); the search goes on.
      if (session.error && (!running || session.state === "searching")) {
        children.push(el("p", { class: "meta", text: String(session.error) }));
      }
    }
    if (running) {
      if (session.code) {
        children.push(el("p", { text: "Check that the other device shows the same code:" }));
        children.push(el("p", { class: "pair-code", "aria-live": "polite", text: String(session.code) }));
      }
      // Only a code on screen can be answered (the agent refuses an answer in any other state).
      const answerable = session.state === "comparing";
      children.push(
        el(
          "div",
          { class: "tools" },
          button("Confirm", () => pairingAction("/api/pairing/confirm"), {
            class: "primary",
            disabled: !answerable || !session.code,
            dataset: { focus: "pair:confirm" },
          }),
          session.state === "searching"
            ? button("Stop searching", () => pairingAction("/api/pairing/refuse"), { dataset: { focus: "pair:stop" } })
            : button("Refuse", () => pairingAction("/api/pairing/refuse"), {
              class: "danger",
              disabled: !answerable,
              dataset: { focus: "pair:refuse" },
            }),
        ),
      );
      // Searching: the devices found so far, each with its own button; nothing pairs until one is picked.
      const devices = pairing.devices || [];
      if (session.state === "searching") {
        children.push(
          el("p", { class: "meta", text: devices.length > 0
            ? "Pick the device to pair with (what each calls itself; the code below will tell you it is the one):"
            : "No device in pairing mode yet: run `plait pair` on the other device." }),
        );
        children.push(
          el("ul", { class: "devices found-devices" }, ...devices.map((device) => {
            const name = String(device.name || "");
            const instance = String(device.instance || "");
            return el("li", { class: "device-card", dataset: { instance } },
              el("span", { class: "name", text: name }), " ",
              el("span", { class: "meta", text: String(device.address || "") }), " ",
              button("Pair", () => pairingAction("/api/pairing/pick", { instance }), {
                class: "primary",
                "aria-label": "Pair with " + name,
                dataset: { focus: "pick:" + instance },
              }));
          })),
        );
      }
    } else if (pairing) {
      children.push(pairingForm());
    }
    replaceChildren(root, children);
    restoreFocus(saved);
    // A pairing that just ended paired a device: the devices (and the pending ones) are stale.
    const current = session ? session.state : null;
    if (current === "paired" && pairingShownState !== "paired") scheduleRefresh(["peers", "pending"]);
    pairingShownState = current;
    // While a pairing runs its state moves on its own (devices found and gone, the code, the other side's
    // answer): the agent announces each move as an event (pairing.found, pairing.lost, pairing.state,
    // pairing.code), which reads the pairing again. Nothing is polled.
  }

  /// Starting a pairing: with the address a device in `plait pair --listen` prints, or by mDNS nearby.
  function pairingForm() {
    const input = el("input", {
      type: "text",
      id: "pair-address",
      name: "address",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "host:port",
      dataset: { focus: "pair:address" },
      oninput: (event) => {
        pairingDraft = event.target.value;
      },
    });
    input.value = pairingDraft;
    const form = el(
      "form",
      { class: "inline-form pair-address" },
      el("label", { for: "pair-address", text: "Address of a device in pairing mode (`plait pair --listen`)" }),
      input,
      el("button", { type: "submit", class: "primary", dataset: { focus: "pair:start" } }, "Pair"),
      button("Search nearby", () => pairingStart({}), { dataset: { focus: "pair:search" } }),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const address = input.value.trim();
      if (address) pairingStart({ address });
    });
    return form;
  }

  async function pairingStart(body) {
    const started = await post("/api/pairing/start", body);
    if (!started) return;
    pairingDraft = "";
    state.pairing = started;
    renderPairing();
  }

  function deviceName(id) {
    const all = [].concat(
      (state.peers && state.peers.peers) || [],
      (state.pending && state.pending.pending) || [],
    );
    const found = all.find((device) => device.device === id);
    return found && found.name ? found.name : shortID(id);
  }

  async function pairingAction(path, body) {
    const answered = await post(path, body || {});
    if (answered) {
      state.pairing = answered;
      renderPairing();
    }
    scheduleRefresh(["pairing"]);
  }

  // MARK: Events

  // What each event kind makes stale.
  const staleBy = {
    "change.applied": ["show"],
    "home.copied": ["status", "peers"],
    "fork": ["show", "peers"],
    "damage.healed": ["show"],
    "peer.connected": ["peers"],
    "peer.disconnected": ["peers"],
    "sync.progress": ["peers"],
    "divergence": ["peers"],
    "pending.device": ["pending"],
    "pairing.code": ["pairing"],
    "pairing.state": ["pairing"],
    "pairing.found": ["pairing"],
    "pairing.lost": ["pairing"],
  };
  const allParts = ["status", "show", "peers", "pending", "pairing"];

  function handleEvent(event) {
    if (!event || typeof event.seq !== "number") return;
    if (state.epoch !== null && event.epoch && event.epoch !== state.epoch) {
      // The agent restarted: what we hold may be from before; read everything again.
      state.epoch = event.epoch;
      state.lastSeq = event.seq;
      scheduleRefresh(allParts);
      return;
    }
    if (event.epoch) state.epoch = event.epoch;
    state.lastSeq = Math.max(state.lastSeq, event.seq);
    if (event.kind === "gap") {
      scheduleRefresh(allParts);
      return;
    }
    if (event.kind === "sync.progress" && event.data && event.data.device) {
      state.progress.set(event.data.device, event.data);
    }
    scheduleRefresh(staleBy[event.kind] || allParts);
  }

  let source = null;
  let longPolling = false;
  let stopped = false;

  function stopEvents() {
    stopped = true;
    if (source) source.close();
    source = null;
  }

  /// SSE first (the browser resumes with Last-Event-ID by itself); if the stream is refused or missing,
  /// long-poll /api/events?since=N instead, which resumes the same way. Resolves once events flow (or polling
  /// took over), so the first load can follow it and nothing that happens meanwhile is missed.
  function startEvents() {
    stopped = false;
    return new Promise((resolve) => {
      if (typeof EventSource !== "function") {
        longPoll();
        resolve();
        return;
      }
      let opened = false;
      // EventSource sends no header of its own: the page key goes in the query, which the agent takes on this
      // route only. The URL is relative, so it goes to the agent's own origin and nowhere else; EventSource is
      // kept (not a fetch() reader) because it resumes with Last-Event-ID by itself.
      let query = "?page_key=" + encodeURIComponent(pageKey() || "");
      if (state.lastSeq > 0) query += "&since=" + encodeURIComponent(state.lastSeq);
      source = new EventSource("/api/events/stream" + query);
      source.onopen = () => {
        opened = true;
        setConnection("Live", "live");
        resolve();
      };
      const onMessage = (message) => {
        try {
          handleEvent(JSON.parse(message.data));
        } catch (error) {
          // A malformed event is the agent's bug; keep the stream.
        }
      };
      source.onmessage = onMessage;
      for (const kind of Object.keys(staleBy).concat(["gap"])) source.addEventListener(kind, onMessage);
      source.onerror = () => {
        if (!source || source.readyState !== EventSource.CLOSED) {
          // The browser retries by itself and resends Last-Event-ID.
          setConnection("Reconnecting…", "down");
          return;
        }
        // Closed for good (an HTTP error, or not an event stream): the browser will not retry.
        source = null;
        if (!opened) {
          longPoll();
          resolve();
          return;
        }
        setConnection("Reconnecting…", "down");
        setTimeout(() => {
          if (stopped) return;
          // Resume after the last event seen, and re-read what a restarted agent may have changed.
          scheduleRefresh(allParts);
          startEvents();
        }, 1000);
      };
    });
  }

  async function longPoll() {
    if (longPolling) return;
    longPolling = true;
    setConnection("Live (polling)", "live");
    let failures = 0;
    while (!stopped) {
      try {
        const answer = await api("GET", "/api/events?since=" + encodeURIComponent(state.lastSeq) + "&timeout=25");
        failures = 0;
        setConnection("Live (polling)", "live");
        if (answer && answer.epoch && state.epoch !== null && answer.epoch !== state.epoch) {
          state.epoch = answer.epoch;
          state.lastSeq = 0;
          scheduleRefresh(allParts);
        }
        for (const event of (answer && answer.events) || []) handleEvent(event);
      } catch (error) {
        if (error.status === 401) break;
        if (error.status === 404) {
          // No event endpoint on this agent: re-read every few seconds rather than never.
          setConnection("Refreshing every 3 s", "down");
          await new Promise((resolve) => setTimeout(resolve, 3000));
          scheduleRefresh(["show", "peers", "pending", "pairing"]);
          continue;
        }
        failures += 1;
        setConnection("Reconnecting…", "down");
        await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * 2 ** failures)));
      }
    }
    longPolling = false;
  }

  // MARK: Start

  async function signIn(code) {
    try {
      keepPageKey(await api("POST", "/api/session", { code }));
      // The code is spent: drop it from the address bar and history, and load the page signed in.
      location.replace("/");
    } catch (error) {
      showLogin(error.status === 0 ? error.message : "That login code was refused (" + error.message + ").");
    }
  }

  async function start() {
    $("password-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = $("password");
      try {
        keepPageKey(await api("POST", "/api/session", { password: input.value }));
        location.replace("/");
      } catch (error) {
        input.value = "";
        showLogin(error.status === 0 ? error.message : "Not signed in: " + error.message);
      }
    });
    $("new-list").addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = $("new-list-title");
      const title = input.value;
      if (!title.trim()) return;
      input.value = "";
      if (!(await edit({ op: "list.add", title })) && input.value === "") input.value = title;
    });

    const code = new URLSearchParams(location.search).get("code");
    if (code) {
      setConnection("Signing in…");
      await signIn(code);
      return;
    }
    // The stream first, then the state: an edit made while the page loads is either in what it reads or
    // announced by an event after it (which reads again). Waiting is bounded: a slow stream never blocks the lists.
    await Promise.race([startEvents(), new Promise((resolve) => setTimeout(resolve, 2000))]);
    try {
      await Promise.all(allParts.map((part) => loaders[part]()));
    } catch (error) {
      if (error.status !== 401) {
        showProblem(error.message);
        setConnection("Not connected", "down");
      }
      return;
    }
    $("login").hidden = true;
    $("app").hidden = false;
    for (const part of allParts) renderers[part]();
    document.documentElement.dataset.ready = "1";
    performance.mark("plait-ready");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
