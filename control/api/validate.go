package api

import "fmt"

// CheckCID returns an error unless s is a valid cluster id: 3 to 16
// lowercase letters and digits (the product docs). Callers check before
// making any request.
func CheckCID(s string) error {
	if len(s) < 3 || len(s) > 16 {
		return fmt.Errorf("invalid cid %q: a cid is 3 to 16 lowercase letters and digits", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return fmt.Errorf("invalid cid %q: a cid is 3 to 16 lowercase letters and digits", s)
		}
	}
	return nil
}
