// A new access key's page: copy buttons, and the secret gone once the page is left.
// Without script the secret is still shown (once) and can be selected and copied by hand.
"use strict";

function armCopy(button) {
  const source = document.getElementById(button.dataset.copy);
  const status = document.querySelector(".new-key .copied");
  if (!source || !navigator.clipboard) {
    return;
  }
  button.hidden = false;
  button.addEventListener("click", () => {
    navigator.clipboard.writeText(source.textContent.trim()).then(
      () => { status.textContent = "Copied to the clipboard."; },
      () => { status.textContent = "The browser refused to copy: select the text and copy it."; },
    );
  });
}

// A page kept in the browser's back-forward cache would show the secret again when the person
// comes back: forget it on leaving, and read the page anew (without the secret) on return.
window.addEventListener("pagehide", () => {
  document.querySelectorAll("code.once").forEach((code) => { code.textContent = ""; });
});
window.addEventListener("pageshow", (event) => {
  if (event.persisted) {
    window.location.reload();
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("button.copy[data-copy]").forEach(armCopy);
});
