// The alerts page: copy the signing secret that is shown once (no inline script: CSP).
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var input = document.getElementById(button.dataset.copy);
      input.select();
      if (navigator.clipboard) {
        navigator.clipboard.writeText(input.value);
      } else {
        document.execCommand("copy");
      }
      button.textContent = "Copied";
    });
  });
});
