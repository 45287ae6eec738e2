// The promotion form: a planned promotion waits until the mirror catches up (a minute or more),
// so once sent its button says so and cannot send it twice. Without script the form works the same.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-busy-text]").forEach((form) => {
    form.addEventListener("submit", () => {
      const button = form.querySelector('button[type="submit"]');
      const status = form.querySelector("[data-busy-status]");
      if (button) {
        button.disabled = true;
      }
      if (status) {
        status.textContent = form.dataset.busyText;
      }
    });
  });
});
