package main

import (
	"fmt"
	"io"
	"os/user"
	"strconv"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/units"
)

// uidTable renders each uid's holdings and recent use next to its fair
// share: `wsched status` and `wsched top` show it.
func uidTable(w io.Writer, indent string, us []api.UIDUse) error {
	if len(us) == 0 {
		return nil
	}
	t := &table{header: []string{"UID", "USER", "LEASES", "BYTES", "QUEUED", "HELD", "USE GiB·s", "USE", "SHARE"},
		right: map[int]bool{0: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true}}
	for _, u := range us {
		share := "-"
		if u.Share > 0 {
			share = fmt.Sprintf("%.0f%% (%s)", 100*u.Share, units.FormatBytes(u.ShareBytes))
		}
		t.add([]string{strconv.Itoa(u.UID), userName(u.UID), strconv.Itoa(u.Leases), units.FormatBytes(u.Bytes),
			strconv.Itoa(u.Queued), units.FormatBytes(u.HeldBytes), fmt.Sprintf("%.0f", u.UseGiBSeconds),
			fmt.Sprintf("%.0f%%", 100*u.UseFraction), share})
	}
	return t.render(w, indent)
}

// userName is uid's login name, or "" when it has none.
func userName(uid int) string {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return ""
	}
	return u.Username
}
