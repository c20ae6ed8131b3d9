package oauth_test

import (
	"testing"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/oauth/storetest"
)

func TestMemoryStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) oauth.GrantStore { return oauth.NewMemoryStore() })
}
