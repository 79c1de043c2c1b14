// Paperclip web UI — the only script. Every page works without it; it adds
// live refresh of [data-poll] regions, busy states on long submits, copy
// buttons, local times and small conveniences. No framework, no build step.
"use strict";

(function () {
  document.documentElement.classList.add("js");

  // The one Trusted Types policy the CSP allows: it passes through HTML that
  // the server rendered with html/template (already escaped) for fragment
  // swaps. Nothing else in this file creates HTML from strings.
  const policy = window.trustedTypes
    ? window.trustedTypes.createPolicy("paperclip", { createHTML: (s) => s })
    : { createHTML: (s) => s };

  // ---- Local times -------------------------------------------------------
  const timeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const rel = typeof Intl.RelativeTimeFormat === "function" ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;

  function relative(d) {
    if (!rel) return "";
    const s = Math.round((d.getTime() - Date.now()) / 1000);
    const abs = Math.abs(s);
    if (abs < 60) return rel.format(s, "second");
    if (abs < 3600) return rel.format(Math.round(s / 60), "minute");
    if (abs < 86400) return rel.format(Math.round(s / 3600), "hour");
    return rel.format(Math.round(s / 86400), "day");
  }

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      el.textContent = timeFmt.format(d);
      el.title = relative(d);
    });
  }

  // ---- Show/hide dependent fields ----------------------------------------
  function toggles(root) {
    root.querySelectorAll("[data-show-when]").forEach((el) => {
      const [name, value] = el.getAttribute("data-show-when").split("=");
      const form = el.closest("form");
      if (!form) return;
      const select = form.querySelector('select[name="' + name + '"]');
      const checked = select || form.querySelector('input[name="' + name + '"]:checked');
      el.hidden = !checked || checked.value !== value;
    });
  }

  document.addEventListener("change", (ev) => {
    const t = ev.target;
    if (t.matches("[data-toggles]")) toggles(t.closest("form") || document);
    if (t.matches("select[data-refresh]")) refreshFragment(t);
    if (t.id === "email-agent" && t.form) {
      t.form.querySelectorAll("[data-js-disabled]").forEach((b) => { b.disabled = t.value === ""; });
    }
    if (t.matches("[data-autosubmit]") && t.form) t.form.requestSubmit();
  });

  // ---- Busy submit buttons -------------------------------------------------
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!form.matches("[data-busy]")) return;
    if (form.getAttribute("aria-busy") === "true") {
      ev.preventDefault(); // block double submission
      return;
    }
    const clicked = ev.submitter || form.querySelector('button[type="submit"]');
    form.setAttribute("aria-busy", "true");
    // Disable after the browser has built the form data.
    setTimeout(() => {
      form.querySelectorAll('button[type="submit"]').forEach((b) => { b.disabled = true; });
      if (clicked && clicked.dataset.busyLabel) {
        const spin = document.createElement("span");
        spin.className = "spinner";
        spin.setAttribute("aria-hidden", "true");
        clicked.textContent = clicked.dataset.busyLabel;
        clicked.prepend(spin);
      }
    }, 0);
    setTimeout(() => {
      if (!form.isConnected || form.getAttribute("aria-busy") !== "true") return;
      const note = document.createElement("p");
      note.className = "hint";
      note.setAttribute("role", "status");
      note.textContent = form.dataset.slowNote || "Still working…";
      form.append(note);
    }, 10000);
  });

  // Pages restored from the back/forward cache must not stay busy.
  window.addEventListener("pageshow", () => {
    document.querySelectorAll('form[aria-busy="true"]').forEach((f) => {
      f.removeAttribute("aria-busy");
      f.querySelectorAll('button[type="submit"]').forEach((b) => { b.disabled = false; });
    });
  });

  // ---- Copy buttons --------------------------------------------------------
  document.addEventListener("click", async (ev) => {
    const btn = ev.target.closest("[data-copy], [data-copy-from]");
    if (!btn) return;
    const src = btn.dataset.copyFrom ? document.getElementById(btn.dataset.copyFrom) : null;
    const text = src ? src.value : btn.dataset.copy;
    const status = (btn.closest(".copy-scope") || btn.parentElement).querySelector(".copy-status");
    let msg = "Copied!";
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) {
      if (src) src.select();
      msg = "Press Ctrl+C to copy.";
    }
    if (status) {
      status.textContent = msg;
      setTimeout(() => { status.textContent = ""; }, 2000);
    }
  });

  // ---- Live regions: poll HTML fragments ------------------------------------
  const pollers = new Map(); // element id -> state

  function setStatus(region, text) {
    const s = region.querySelector(".poll-status");
    if (s) s.textContent = text;
  }

  function schedule(state, ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => poll(state), ms);
  }

  // One fetch per region at a time: a push arriving while a fetch is in
  // flight asks for one more afterwards. Two overlapping fetches could
  // otherwise swap the older answer in last and keep the newer ETag, and
  // the region would then stay stale behind 304s.
  async function poll(state) {
    if (state.inflight) { state.again = true; return; }
    state.inflight = true;
    try {
      await pollOnce(state);
    } finally {
      state.inflight = false;
      if (state.again) { state.again = false; schedule(state, 0); }
    }
  }

  async function pollOnce(state) {
    const region = document.getElementById(state.id);
    if (!region || state.stopped) return;
    if (document.hidden) return; // resumed by visibilitychange
    const busy = document.activeElement && region.contains(document.activeElement) &&
      document.activeElement.matches("input, textarea, select");
    if (busy) { schedule(state, state.ms); return; }
    let res;
    try {
      const headers = { "X-Requested-With": "paperclip-poll" };
      if (state.etag) headers["If-None-Match"] = state.etag;
      res = await fetch(state.url, { headers, credentials: "same-origin", cache: "no-store" });
    } catch (e) {
      return backoff(state, region);
    }
    if (res.status === 401) {
      state.stopped = true;
      setStatus(region, "Your session has expired. Sign in again.");
      return;
    }
    if (res.status === 304) {
      state.failures = 0;
      schedule(state, state.ms);
      return;
    }
    if (!res.ok) return backoff(state, region);
    state.failures = 0;
    const etag = res.headers.get("ETag");
    const html = await res.text();
    if (!region.isConnected) { schedule(state, 0); return; }
    state.etag = etag;
    swap(state, region, html);
  }

  function backoff(state, region) {
    state.failures = (state.failures || 0) + 1;
    const ms = Math.min(state.ms * Math.pow(2, state.failures), 60000);
    setStatus(region, "Couldn’t refresh — retrying in " + Math.round(ms / 1000) + " s");
    schedule(state, ms);
  }

  // A swap waits while a pointer is pressed inside the region: replacing
  // the node between the press and the release would swallow the click
  // (the release lands on a different element, so no click fires), which
  // a live task page refreshing as its run progresses made easy to hit.
  let pressed = null; // the element under the pointer's press, if any
  const held = new Map(); // region id -> the swap waiting for the release
  document.addEventListener("pointerdown", (ev) => { pressed = ev.target; }, true);
  const release = () => {
    pressed = null;
    // After the click that this release makes has been dispatched.
    setTimeout(() => {
      const run = [...held.values()];
      held.clear();
      run.forEach((f) => f());
    }, 0);
  };
  document.addEventListener("pointerup", release, true);
  document.addEventListener("pointercancel", release, true);

  // The focused element of a region about to be swapped, as something to
  // find it by in the new content: its id, or (a link without one, like
  // the sidebar's Review link inside its polled item) its tag, href and
  // place among the region's focusable elements. Why: a swap replaces
  // every node, and a keyboard user whose focus was on a replaced element
  // lost it to the page body.
  const focusable = (root) => [...root.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]")];
  function focusKey(region) {
    const a = document.activeElement;
    if (!a || a === region || !region.contains(a)) return null;
    return { id: a.id, tag: a.tagName, href: a.getAttribute("href"), index: focusable(region).indexOf(a) };
  }
  function focusAgain(node, key) {
    if (key.id) return document.getElementById(key.id);
    const list = focusable(node);
    return list.find((e) => e.tagName === key.tag && key.href !== null && e.getAttribute("href") === key.href) ||
      (list[key.index] && list[key.index].tagName === key.tag ? list[key.index] : null);
  }

  function swap(state, region, html) {
    if (pressed && region.contains(pressed)) {
      held.set(state.id, () => { const r = document.getElementById(state.id); if (r) swap(state, r, html); });
      return;
    }
    const doc = new DOMParser().parseFromString(policy.createHTML(html), "text/html");
    const fresh = doc.getElementById(state.id);
    if (!fresh) { schedule(state, state.ms); return; }
    // Keep open disclosures, focus and scroll across the swap.
    const open = new Set();
    region.querySelectorAll("details[open]").forEach((d, i) => open.add(d.id || "#" + i));
    const focus = focusKey(region);
    const x = window.scrollX, y = window.scrollY;
    const node = document.importNode(fresh, true);
    node.querySelectorAll("details").forEach((d, i) => { if (open.has(d.id || "#" + i)) d.open = true; });
    region.replaceWith(node);
    enhance(node);
    syncFields(node);
    if (focus) { const f = focusAgain(node, focus); if (f) f.focus({ preventScroll: true }); }
    window.scrollTo(x, y);
    setStatus(node, "Updated " + new Date().toLocaleTimeString());
    start(node, state);
  }

  // A region naming form fields in data-sync-<field id> attributes keeps
  // them current: a select still showing the value the page was rendered
  // with follows the refreshed region (the task's Details form after the
  // agent set the task Done; saving it unchanged would set the status
  // back), a select the user changed is left alone.
  function syncFields(region) {
    for (const a of region.attributes) {
      if (!a.name.startsWith("data-sync-")) continue;
      const el = document.getElementById(a.name.slice("data-sync-".length));
      if (!el || el.tagName !== "SELECT" || el.value === a.value) continue;
      const initial = el.querySelector("option[selected]");
      if (initial ? el.value !== initial.value : el.selectedIndex !== 0) continue;
      const opt = [...el.options].find((o) => o.value === a.value);
      if (!opt) continue;
      if (initial) initial.removeAttribute("selected");
      opt.setAttribute("selected", "");
      el.value = a.value;
    }
  }

  function start(el, prev) {
    const url = el.getAttribute("data-poll");
    if (!url || !el.id) return;
    const ms = parseInt(el.getAttribute("data-poll-ms"), 10) || 10000;
    const state = prev || { id: el.id };
    state.url = url;
    state.ms = ms;
    pollers.set(el.id, state);
    schedule(state, ms);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      pollers.forEach((s) => clearTimeout(s.timer));
    } else {
      pollers.forEach((s) => { if (!s.stopped) schedule(s, 0); });
    }
  });

  // ---- Server-sent events: refresh regions as soon as data changes -------
  // /c/{id}/events names what changed ("tasks", "runs", "conversations");
  // a region with data-live="…" refreshes on those kinds, one without on
  // any. Polling keeps running underneath as the fallback.
  function liveEvents() {
    const main = document.getElementById("main");
    const url = main && main.dataset.events;
    if (!url || typeof EventSource !== "function") return;
    const es = new EventSource(url);
    const refresh = (kind) => {
      if (document.hidden) return;
      pollers.forEach((state) => {
        const region = document.getElementById(state.id);
        if (!region || state.stopped) return;
        const live = region.getAttribute("data-live");
        if (!live || live.split(" ").includes(kind)) schedule(state, 0);
      });
    };
    ["tasks", "runs", "conversations"].forEach((kind) => es.addEventListener(kind, () => refresh(kind)));
    window.addEventListener("pagehide", () => es.close());
  }

  // ---- Dependent regions: a select re-renders a fragment ---------------
  // <select data-refresh="name"> fetches ?fragment=name of this page with
  // the form's data-refresh selects as query parameters and swaps the
  // element with that id (the wizard's trust notice follows the agent).
  // While a refresh is in flight the page carries data-refreshing (a
  // count), so scripted clients such as the browser tests can wait for the
  // fragment to settle before acting on controls inside it.
  let refreshing = 0;
  function markRefreshing(delta) {
    refreshing += delta;
    if (refreshing > 0) document.documentElement.dataset.refreshing = String(refreshing);
    else delete document.documentElement.dataset.refreshing;
  }

  async function refreshFragment(select) {
    const form = select.form;
    const id = select.dataset.refresh;
    const params = new URLSearchParams(location.search);
    form.querySelectorAll("select[data-refresh]").forEach((s) => params.set(s.name, s.value));
    params.set("fragment", id);
    markRefreshing(1);
    try {
      const res = await fetch(location.pathname + "?" + params.toString(), { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(policy.createHTML(await res.text()), "text/html");
      const fresh = doc.getElementById(id);
      const old = document.getElementById(id);
      if (!fresh || !old) return;
      const node = document.importNode(fresh, true);
      old.replaceWith(node);
      enhance(node);
    } catch (e) { /* the page still works; Continue re-validates */ }
    finally { markRefreshing(-1); }
  }

  // ---- Address check (wizard step 2) -------------------------------------
  // Debounced 350 ms; the request in flight is aborted on change and an
  // answer is shown only for the username and domain it was asked for.
  // The answer is "taken" or "unknown", never "free".
  function addressCheck(form) {
    const name = form.querySelector("#email-name");
    const domain = form.querySelector("#email-domain");
    const submit = form.querySelector("#step-address-continue");
    if (!name || !domain) return;
    let timer = null, ctrl = null, current = "";
    const keyOf = () => name.value + "@" + domain.value;
    function apply(box) {
      const st = box.dataset.status || "";
      const bad = st === "taken" || st === "invalid";
      if (bad) {
        name.setAttribute("aria-invalid", "true");
        name.setAttribute("aria-describedby", "email-address-error email-name-hint");
      } else {
        name.removeAttribute("aria-invalid");
        name.setAttribute("aria-describedby", "email-name-hint");
      }
      const existing = form.querySelector("#address-mode-existing");
      const blocked = (bad || st === "checking") && !(existing && existing.checked);
      if (submit) submit.disabled = blocked;
    }
    function show(html) {
      const doc = new DOMParser().parseFromString(policy.createHTML(html), "text/html");
      const fresh = doc.getElementById("address-check");
      const old = form.querySelector("#address-check");
      if (!fresh || !old) return;
      const node = document.importNode(fresh, true);
      old.replaceWith(node);
      apply(node);
    }
    function pending() {
      const box = form.querySelector("#address-check");
      box.dataset.status = "checking";
      box.querySelector("#email-address-status").textContent = "Checking address…";
      box.querySelector("#email-address-error").textContent = "";
      const sug = box.querySelector(".suggestions");
      if (sug) sug.remove();
      apply(box);
    }
    async function run() {
      const key = keyOf();
      current = key;
      if (ctrl) ctrl.abort();
      ctrl = new AbortController();
      const body = new URLSearchParams({ username: name.value, domain: domain.value });
      const csrf = form.querySelector('input[name="csrf"]');
      try {
        const res = await fetch(form.dataset.check, { method: "POST", body, signal: ctrl.signal, credentials: "same-origin",
          headers: { "X-CSRF-Token": csrf ? csrf.value : "" } });
        const html = await res.text();
        if (key !== current) return; // a stale answer
        if (!res.ok) {
          show('<div id="address-check" class="address-check" data-status="error"><p id="email-address-status" role="status" class="check-status">Could not check this address. Try again in a moment.</p><p id="email-address-error" role="alert" class="error-text"></p></div>');
          return;
        }
        show(html);
      } catch (e) {
        if (e.name === "AbortError" || key !== current) return;
        show('<div id="address-check" class="address-check" data-status="error"><p id="email-address-status" role="status" class="check-status">Could not check this address. The network request failed.</p><p id="email-address-error" role="alert" class="error-text"></p></div>');
      }
    }
    function changed() {
      const lower = name.value.toLowerCase();
      if (lower !== name.value) name.value = lower;
      clearTimeout(timer);
      if (name.value === "") { current = ""; return; }
      pending();
      timer = setTimeout(run, 350);
    }
    name.addEventListener("input", changed);
    name.addEventListener("change", () => { if (keyOf() !== current) changed(); });
    domain.addEventListener("change", changed);
    form.addEventListener("change", (ev) => { if (ev.target.name === "mode") apply(form.querySelector("#address-check")); });
    form.addEventListener("click", (ev) => {
      const b = ev.target.closest(".address-suggestion");
      if (!b) return;
      name.value = b.dataset.suggest;
      name.focus();
      changed();
    });
  }

  // ---- Review keys ---------------------------------------------------------
  // On the review page: a approve, e edit, r reject (focus the reason),
  // j/k next/previous held email. Never while typing.
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const el = document.querySelector('[data-review-key="' + ev.key + '"]');
    if (!el) return;
    ev.preventDefault();
    const focus = el.getAttribute("data-review-focus");
    if (focus) { const f = document.getElementById(focus); if (f) f.focus(); return; }
    el.click();
  });

  document.addEventListener("click", (ev) => {
    const b = ev.target.closest && ev.target.closest("[data-review-focus]");
    if (!b) return;
    const f = document.getElementById(b.getAttribute("data-review-focus"));
    if (f) f.focus();
  });

  // ---- Setup ---------------------------------------------------------------
  function enhance(root) {
    localTimes(root);
    toggles(root);
    root.querySelectorAll("[data-js-disabled]").forEach((b) => {
      const sel = b.form && b.form.querySelector("#email-agent");
      b.disabled = !!sel && sel.value === "";
    });
  }

  // "/" focuses the top bar's search box, unless the user is typing.
  function slashFocus() {
    const box = document.querySelector("[data-slash-focus]");
    if (!box) return;
    document.addEventListener("keydown", (ev) => {
      if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      const t = ev.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      ev.preventDefault();
      box.focus();
    });
  }

  // ---- Keyboard shortcuts ---------------------------------------------------
  // c: new task; j / k: next / previous row of the page's list (Enter opens
  // it); /: the search box when the page has one; ?: this list. Never while
  // typing in a field, and never with a modifier key.
  const listRows = "#task-list tbody tr, #run-list tbody tr, #conversation-list .conv-row, #agent-list tbody tr, #activity-list tbody tr";
  function shortcuts() {
    const main = document.getElementById("main");
    const help = document.getElementById("shortcuts");
    let current = -1;
    const move = (delta) => {
      const rows = Array.from(document.querySelectorAll(listRows));
      if (!rows.length) return;
      current = Math.max(0, Math.min(rows.length - 1, current + delta));
      rows.forEach((r, i) => r.classList.toggle("kb-current", i === current));
      const link = rows[current].querySelector("a[href]");
      if (link) link.focus();
      rows[current].scrollIntoView({ block: "nearest" });
    };
    document.addEventListener("keydown", (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
      const t = ev.target;
      if (t.closest && t.closest("input, textarea, select, [contenteditable]")) return;
      const company = main && main.dataset.events ? main.dataset.events.replace(/\/events$/, "") : "";
      if (ev.key === "c" && company) { ev.preventDefault(); location.assign(company + "/tasks/new"); }
      else if (ev.key === "j") { ev.preventDefault(); move(1); }
      else if (ev.key === "k") { ev.preventDefault(); move(-1); }
      else if (ev.key === "/") {
        const search = document.querySelector('input[type="search"], input[name="q"]');
        if (search) { ev.preventDefault(); search.focus(); }
      } else if (ev.key === "?" && help) {
        ev.preventDefault();
        if (help.open) help.close(); else help.showModal();
      }
    });
  }

  function init() {
    enhance(document);
    slashFocus();
    document.querySelectorAll("[data-poll]").forEach((el) => start(el));
    liveEvents();
    shortcuts();
    document.querySelectorAll("form[data-address-form]").forEach(addressCheck);
    const alert = document.querySelector("[data-focus]");
    if (alert) alert.focus();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
