package installer

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnabledAtBoot(t *testing.T) {
	etc := t.TempDir()
	if enabledAtBoot(PlatformSystemd, "runos-vpnd", etc) || enabledAtBoot(PlatformSysV, "runos-vpnd", etc) {
		t.Fatal("enabled with no links")
	}
	for _, p := range []string{"systemd/system/multi-user.target.wants/runos-vpnd.service", "rc2.d/S50runos-vpnd"} {
		if err := os.MkdirAll(filepath.Join(etc, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/nowhere", filepath.Join(etc, p)); err != nil {
			t.Fatal(err)
		}
	}
	if !enabledAtBoot(PlatformSystemd, "runos-vpnd", etc) || !enabledAtBoot(PlatformSysV, "runos-vpnd", etc) {
		t.Error("not enabled with the links in place")
	}
	if enabledAtBoot(PlatformSysV, "runos-vpnd2", etc) {
		t.Error("another service's link counted")
	}
	if !enabledAtBoot(PlatformLaunchd, "com.runos.vpnd", etc) {
		t.Error("launchd starts what is installed")
	}
}
