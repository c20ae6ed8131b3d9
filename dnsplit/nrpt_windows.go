package dnsplit

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// nrptBase is where the local NRPT lives. (Rules pushed by Group Policy
// live under SOFTWARE\Policies\...\DnsPolicyConfig and, when present, make
// Windows ignore these: see README.)
const nrptBase = `SYSTEM\CurrentControlSet\Services\Dnscache\Parameters\DnsPolicyConfig`

// winRegistry is Registry over HKLM.
type winRegistry struct{}

func (winRegistry) Keys() ([]string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, nrptBase, registry.ENUMERATE_SUB_KEYS)
	if errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return k.ReadSubKeyNames(-1)
}

func (winRegistry) SetKey(name string, values []RegistryValue) error {
	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, nrptBase+`\`+name, registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	for _, v := range values {
		switch v.Type {
		case RegDWord:
			err = k.SetDWordValue(v.Name, v.DWord)
		case RegString:
			s := ""
			if len(v.Strings) > 0 {
				s = v.Strings[0]
			}
			err = k.SetStringValue(v.Name, s)
		case RegMultiStr:
			err = k.SetStringsValue(v.Name, v.Strings)
		default:
			err = fmt.Errorf("unknown value type %q", v.Type)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	return nil
}

func (winRegistry) DeleteKey(name string) error {
	err := registry.DeleteKey(registry.LOCAL_MACHINE, nrptBase+`\`+name)
	if errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return nil
	}
	return err
}

var procDnsFlushResolverCache = windows.NewLazySystemDLL("dnsapi.dll").NewProc("DnsFlushResolverCache")

// Flush makes the DNS Client service drop cached answers so the new rules
// apply to names looked up before.
func (winRegistry) Flush() error {
	if err := procDnsFlushResolverCache.Find(); err != nil {
		return err
	}
	if r, _, err := procDnsFlushResolverCache.Call(); r == 0 {
		return err
	}
	return nil
}
