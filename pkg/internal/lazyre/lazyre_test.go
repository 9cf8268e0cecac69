package lazyre

import "testing"

func TestCompileOnceOnFirstUse(t *testing.T) {
	re := Compile(`^a+$`)
	first := re()
	if !first.MatchString("aaa") || first.MatchString("ab") {
		t.Fatalf("%v does not match as ^a+$", first)
	}
	if re() != first {
		t.Fatal("a second call compiled again")
	}
}

func TestCompilePanicsOnABadExpression(t *testing.T) {
	re := Compile(`(`) // no panic yet: nothing is compiled before the first use
	defer func() {
		if recover() == nil {
			t.Fatal("a bad expression did not panic at its first use")
		}
	}()
	re()
}
