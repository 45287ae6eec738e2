// A page following a task that runs on the server (an import, an asynchronous merge): while its
// section marked data-running="true" says the task runs, ask for the page again every
// data-refresh seconds (lakeFS's UI polls an import every 3 s) and put the section's fresh
// content in place, until the task has ended. Without script, a <noscript> meta refresh reloads
// the whole page instead.
"use strict";

function follow(section) {
  const every = 1000 * (Number(section.dataset.refresh) || 3);
  const again = () => window.setTimeout(check, every);
  async function check() {
    let response;
    try {
      response = await fetch(window.location.href, {
        headers: { Accept: "text/html" },
        cache: "no-store",
        credentials: "same-origin",
      });
    } catch {
      again(); // the server may be restarting: keep asking
      return;
    }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById(section.id);
    if (!fresh) {
      // signed out, or the task is gone: let the browser show whatever the page is now
      window.location.reload();
      return;
    }
    section.replaceChildren(...Array.from(fresh.childNodes, (node) => document.importNode(node, true)));
    section.dataset.running = fresh.dataset.running;
    if (fresh.dataset.running === "true") {
      again();
    } else {
      document.title = page.title;
    }
  }
  again();
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-running='true'][data-refresh][id]").forEach(follow);
});
