// Package finalizers removes a module's finalizers from the objects its
// Finalize bindings hold, so that nothing is left stuck in deletion once the
// module is gone (`<module> unregister --remove-finalizers`).
package finalizers
