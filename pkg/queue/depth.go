package queue

// MaxDepth bounds the nesting of task-queue.json as jq sees it: jq refuses
// documents nested past its limit ("Exceeds depth limit for parsing", 256
// in jq 1.6), and a file jq cannot read breaks every recipe built on it.
// 100 leaves a wide margin.
const MaxDepth = 100

// maxValueDepth bounds JSON a task stores (a result): the document, its
// tasks array and the task object enclose it.
const maxValueDepth = MaxDepth - 3

// jsonDepth returns how deeply the arrays and objects of valid JSON nest:
// 0 for a scalar, 1 for [] or {"a":1}, 2 for [[]], and so on.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}
