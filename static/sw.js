// handoff's service worker: it shows the Web Push notifications of new
// drafts (approvals.webpush) and opens the draft's card when one is
// clicked. A notification offers no action that decides: deciding stays
// on the dashboard's page, behind its session and CSRF token.
'use strict';

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let msg = {};
  try {
    msg = event.data ? event.data.json() : {};
  } catch (e) {
    msg = {};
  }
  const title = typeof msg.title === 'string' && msg.title ? msg.title : 'A new draft waits';
  event.waitUntil(self.registration.showNotification(title, {
    body: typeof msg.body === 'string' ? msg.body : '',
    tag: typeof msg.tag === 'string' ? msg.tag : undefined,
    data: { url: typeof msg.url === 'string' ? msg.url : '/drafts' },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  // Only an address on the dashboard's own origin is opened.
  let url = new URL('/drafts', self.location.origin);
  try {
    const u = new URL(event.notification.data && event.notification.data.url, self.location.origin);
    if (u.origin === self.location.origin) {
      url = u;
    }
  } catch (e) { /* the queue, then */ }
  event.waitUntil((async () => {
    const open = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    for (const c of open) {
      if (new URL(c.url).origin === url.origin && 'navigate' in c) {
        await c.focus();
        return c.navigate(url.href);
      }
    }
    return self.clients.openWindow(url.href);
  })());
});
