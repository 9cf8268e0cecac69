package agent

import "testing"

// TestHostKeyTellsClonesApart: cloned machines share their host name and,
// in the first network namespace, its number; their kernels' boot ids
// differ, and so must the keys of their agents on a shared data root.
func TestHostKeyTellsClonesApart(t *testing.T) {
	const ns = "net:[4026531840]"
	a := hostKey("twin", "6f0b5a0e-0d51-4a47-9c1b-2b1a5f3e9d01\n", ns)
	b := hostKey("twin", "0c7d3f22-8e4b-4d8e-a0a4-7b9f61e2c5aa\n", ns)
	if a == b {
		t.Fatalf("two kernels share the key %q", a)
	}
	if hostKey("twin", "6f0b5a0e-0d51-4a47-9c1b-2b1a5f3e9d01", ns) != a {
		t.Fatal("the boot id's newline changes the key")
	}
	if hostKey("twin", "6f0b5a0e-0d51-4a47-9c1b-2b1a5f3e9d01", "net:[4026532000]") == a {
		t.Fatal("two network namespaces share a key")
	}
}
