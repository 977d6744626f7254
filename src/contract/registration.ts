// How a plugin registers with the kubelet. The operator is told the mode and renders the plugin pods
// for it (the flag, the mounted directories); the plugin registers that way.

export const REGISTRATION_MODES = ["kubelet", "watcher"] as const;
/** `kubelet`: Register on kubelet.sock; `watcher`: a socket in the kubelet's plugin-watcher directory. */
export type RegistrationMode = (typeof REGISTRATION_MODES)[number];
