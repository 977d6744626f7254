// The controller machinery on @kubernetes/client-node: informers, work queue, leader election, apply, the
// object client, errors.
export * from "./apply.js";
export * from "./backoff.js";
export * from "./clock.js";
export * from "./connections.js";
export * from "./errors.js";
export * from "./indexed-cache.js";
export * from "./informer.js";
export * from "./fence.js";
export * from "./leader.js";
export * from "./lease-store.js";
export * from "./objects.js";
export * from "./request.js";
export * from "./resources.js";
export * from "./watch.js";
export * from "./workqueue.js";
export * from "./events.js";
