package node

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// vkLogger lets virtual-kubelet's node library log through the structured
// logger of Run's context. Its Debug goes to verbosity 4, like the library's
// own klog adapter; Warn is logged as Info with level=warning; Fatal logs an
// error and does not exit: a library must not end the process.
type vkLogger struct {
	l   logr.Logger
	err error
}

var _ vklog.Logger = vkLogger{}

func (v vkLogger) Debug(args ...any) {
	if v.l.V(4).Enabled() {
		v.l.V(4).Info(fmt.Sprint(args...), v.errKV()...)
	}
}
func (v vkLogger) Debugf(format string, args ...any) {
	if v.l.V(4).Enabled() {
		v.l.V(4).Info(fmt.Sprintf(format, args...), v.errKV()...)
	}
}
func (v vkLogger) Info(args ...any) { v.l.Info(fmt.Sprint(args...), v.errKV()...) }
func (v vkLogger) Infof(format string, args ...any) {
	v.l.Info(fmt.Sprintf(format, args...), v.errKV()...)
}
func (v vkLogger) Warn(args ...any) {
	v.l.Info(fmt.Sprint(args...), append(v.errKV(), "level", "warning")...)
}
func (v vkLogger) Warnf(format string, args ...any) {
	v.l.Info(fmt.Sprintf(format, args...), append(v.errKV(), "level", "warning")...)
}
func (v vkLogger) Error(args ...any) { v.l.Error(v.err, fmt.Sprint(args...)) }
func (v vkLogger) Errorf(format string, args ...any) {
	v.l.Error(v.err, fmt.Sprintf(format, args...))
}
func (v vkLogger) Fatal(args ...any) { v.Error(args...) }
func (v vkLogger) Fatalf(format string, args ...any) {
	v.Errorf(format, args...)
}

func (v vkLogger) WithField(key string, value any) vklog.Logger {
	return vkLogger{l: v.l.WithValues(key, value), err: v.err}
}

func (v vkLogger) WithFields(fields vklog.Fields) vklog.Logger {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, fields[k])
	}
	return vkLogger{l: v.l.WithValues(kv...), err: v.err}
}

func (v vkLogger) WithError(err error) vklog.Logger { return vkLogger{l: v.l, err: err} }

// errKV is the error as a key-value pair for the non-error levels.
func (v vkLogger) errKV() []any {
	if v.err == nil {
		return nil
	}
	return []any{"err", v.err}
}
