// An import's page: while the import runs, ask for the page again every few seconds (as
// lakeFS's UI polls an import every 3 s) and put its fresh status in place, until it has ended.
// Without script, a <noscript> meta refresh reloads the whole page instead.
"use strict";

function followImport(section) {
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
    const fresh = page.getElementById("import-status");
    if (!fresh) {
      // signed out, or the import is gone: let the browser show whatever the page is now
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
  const section = document.getElementById("import-status");
  if (section && section.dataset.running === "true") {
    followImport(section);
  }
});
