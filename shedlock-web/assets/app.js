// The dashboard's only script: it refreshes the tables and sends the actions. Without it the
// pages still read. The action token stays in this tab's sessionStorage and travels only as an
// `Authorization: Bearer` header on the actions' POSTs. Every text from the server is set as text,
// never as markup. The rules are in docs/dashboard.md.
"use strict";

(function () {
  const KEY = "shedlock-token";
  const REFRESH_MS = 2000;
  const message = document.getElementById("message");

  function token() {
    try {
      return sessionStorage.getItem(KEY) || "";
    } catch (_) {
      return "";
    }
  }

  function say(text, ok) {
    if (!message) return;
    message.textContent = text;
    message.className = ok ? "ok" : "err";
  }

  function showTokenState() {
    const state = document.getElementById("token-state");
    if (state) state.textContent = token() ? "token set for this tab" : "no token: actions are refused";
  }

  const tokenForm = document.getElementById("token-form");
  if (tokenForm) {
    tokenForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const input = document.getElementById("token");
      const value = input.value.trim();
      try {
        if (value) sessionStorage.setItem(KEY, value);
      } catch (_) {
        say("this browser keeps no session storage: actions cannot be sent", false);
      }
      input.value = "";
      showTokenState();
    });
    document.getElementById("token-forget").addEventListener("click", () => {
      try {
        sessionStorage.removeItem(KEY);
      } catch (_) {
        // nothing kept
      }
      showTokenState();
    });
  }
  showTokenState();

  // What each form sends to its `action`: its JSON body.
  function body(form) {
    const data = new FormData(form);
    const field = (name) => String(data.get(name) || "").trim();
    switch (form.dataset.action) {
      case "pause": {
        const asked = {};
        if (field("for")) asked.for = field("for");
        if (field("reason")) asked.reason = field("reason");
        return asked;
      }
      case "unlock":
        return {
          owner: String(data.get("owner") || ""),
          locked_at: field("locked_at"),
          token: field("token") === "" ? null : Number(field("token")),
          election: data.get("election") === "on",
        };
      default:
        return {};
    }
  }

  function done(action, answer) {
    switch (action) {
      case "pause": {
        const until = answer.paused.until ? "until " + answer.paused.until : "until resumed";
        return "paused " + answer.job + " " + until + ", by " + answer.paused.by;
      }
      case "resume":
        return "resumed " + answer.job;
      case "trigger":
        return "asked for a run of " + answer.job + " now, by " + answer.trigger.by;
      case "unlock":
        return "freed " + answer.freed.name + ", held by " + answer.freed.holder;
      default:
        return "done";
    }
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("act")) return;
    event.preventDefault();
    if (event.submitter) event.submitter.blur();
    const headers = { "Content-Type": "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    try {
      const response = await fetch(form.action, {
        method: "POST",
        headers: headers,
        body: JSON.stringify(body(form)),
        credentials: "same-origin",
      });
      let answer = {};
      try {
        answer = await response.json();
      } catch (_) {
        answer = { error: "the dashboard answered " + response.status };
      }
      if (response.ok) {
        say(done(form.dataset.action, answer), true);
        form.reset();
      } else {
        const hint = response.status === 401 ? " (enter the action token above)" : "";
        say(String(answer.error || response.status) + hint, false);
      }
    } catch (error) {
      say("the dashboard did not answer: " + error, false);
    }
    refresh();
  });

  // Whether the operator is busy in `element`: typing in a field of it, or a field or box of it
  // changed and not sent yet.
  function busy(element) {
    const active = document.activeElement;
    if (active && element.contains(active) && active.tagName === "INPUT" && active.type !== "checkbox") {
      return true;
    }
    return Array.from(element.querySelectorAll("input")).some((input) => {
      if (input.type === "hidden") return false;
      if (input.type === "checkbox" || input.type === "radio") return input.checked !== input.defaultChecked;
      return input.value !== input.defaultValue;
    });
  }

  let refreshing = false;
  async function refresh() {
    const parts = document.querySelectorAll("[data-refresh][id]");
    // A hidden tab reads nothing: each refresh reads the store.
    if (refreshing || parts.length === 0 || document.hidden) return;
    refreshing = true;
    try {
      const response = await fetch(window.location.href, {
        headers: { Accept: "text/html" },
        credentials: "same-origin",
      });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      parts.forEach((part) => {
        const next = fresh.getElementById(part.id);
        if (next && !busy(part)) part.replaceWith(document.importNode(next, true));
      });
      const now = fresh.querySelector(".now");
      const shown = document.querySelector(".now");
      if (now && shown) shown.textContent = now.textContent;
    } catch (_) {
      // the next tick tries again
    } finally {
      refreshing = false;
    }
  }
  window.setInterval(refresh, REFRESH_MS);
})();
