// The console's live parts: control pushes each change of what the page
// shows over server-sent events, and this puts the new sections in place
// (keeping the keyboard focus where it was). Buttons post their forms in
// the background and say what happened; the page works without this too.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var seen = {};

  function say(text, failed) {
    if (!live) return;
    live.textContent = text;
    live.classList.toggle('failed', !!failed);
  }

  function apply(sections) {
    var focused = document.activeElement && document.activeElement.id;
    Object.keys(sections).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && seen[id] !== sections[id]) {
        el.innerHTML = sections[id];
        seen[id] = sections[id];
      }
    });
    if (focused && document.activeElement !== document.getElementById(focused)) {
      var again = document.getElementById(focused);
      if (again) again.focus();
    }
  }

  if (window.EventSource && document.body.dataset.since !== undefined) {
    var es = new EventSource('/console/events?since=' + encodeURIComponent(document.body.dataset.since));
    es.addEventListener('open', function () { document.body.dataset.live = 'connected'; });
    es.addEventListener('error', function () { document.body.dataset.live = 'reconnecting'; });
    es.addEventListener('update', function (e) { apply(JSON.parse(e.data).sections); });
    es.addEventListener('signedout', function () { es.close(); window.location.assign('/console'); });
  }

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form.classList.contains('action') || !window.fetch) return;
    ev.preventDefault();
    var button = form.querySelector('button');
    if (button) button.disabled = true;
    say((button && button.getAttribute('aria-label') || 'Working') + '…');
    fetch(form.action, {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Accept': 'application/json' },
      body: new URLSearchParams(new FormData(form))
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (r.ok) { say(j.message || 'Done.'); return; }
        say('Failed: ' + (j.error || r.status), true);
        if (button) button.disabled = false;
        if (r.status === 401) window.location.assign('/console');
      });
    }).catch(function (e) {
      say('Failed: ' + e, true);
      if (button) button.disabled = false;
    });
  });
}());
