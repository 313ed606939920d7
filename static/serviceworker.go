package static

// ServiceWorker is the dashboard's service worker (sw.js), which web
// serves at /sw.js, unhashed: a service worker's scope is at most the
// directory of its address, and /sw.js covers the whole dashboard; a
// browser checks it for updates itself.
func ServiceWorker() *File { return set.byName["sw.js"] }
