// LakeMirror's web UI: behaviour that needs script (the CSP allows no inline script).
// Every page works without it; it only adds what a person would otherwise have to check.
"use strict";

// A form marked data-confirm-name (deleting a repository) can be sent only once the name typed
// in its "confirm" field is that name; the server checks it again.
function armConfirmation(form) {
  const wanted = form.dataset.confirmName;
  const field = form.querySelector('input[name="confirm"]');
  const button = form.querySelector('button[type="submit"]');
  if (!field || !button) {
    return;
  }
  const update = () => {
    button.disabled = field.value !== wanted;
  };
  field.addEventListener("input", update);
  update();
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-confirm-name]").forEach(armConfirmation);
});
