package patterns

import (
	"strings"
	"unicode"
)

// Task types, the first half of a signature.
const (
	TaskDataQuality = "data_quality"
	TaskReport      = "report"
	TaskComparison  = "comparison"
	TaskTrend       = "trend"
	TaskRanking     = "ranking"
	TaskBreakdown   = "breakdown"
	TaskLookup      = "lookup"
)

// taskRules are checked in order; the first type with a cue in the goal
// wins, so a "report comparing regions" is a report. English cues match
// whole words (or a word prefix when they end in '*'); Chinese cues match
// as substrings.
var taskRules = []struct {
	typ  string
	cues []string
}{
	{TaskDataQuality, []string{"quality", "missing", "duplicate*", "null*", "invalid", "anomal*", "outlier*", "clean*", "质量", "缺失", "重复", "异常"}},
	{TaskReport, []string{"report*", "summar*", "overview", "deep dive", "brief*", "报告", "总结", "汇总", "概览"}},
	{TaskComparison, []string{"compar*", "versus", "vs", "against", "difference", "对比", "比较", "相比", "差异"}},
	{TaskTrend, []string{"trend*", "grow*", "growth", "over time", "monthly", "weekly", "change*", "declin*", "趋势", "增长", "变化", "下降"}},
	{TaskRanking, []string{"top", "highest", "lowest", "best", "worst", "most", "least", "rank*", "largest", "smallest", "最高", "最低", "排名", "最多", "最少"}},
	{TaskBreakdown, []string{"by", "breakdown", "distribution", "split", "per", "share", "分布", "按", "构成", "占比"}},
}

// ClassifyTask is the task type of a goal, by rules over its words in
// English and Chinese; TaskLookup when no rule applies.
func ClassifyTask(goal string) string {
	lower := strings.ToLower(goal)
	words := strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	joined := " " + strings.Join(words, " ") + " "
	for _, rule := range taskRules {
		for _, cue := range rule.cues {
			if hasCue(lower, joined, words, cue) {
				return rule.typ
			}
		}
	}
	return TaskLookup
}

func hasCue(lower, joined string, words []string, cue string) bool {
	if !isASCII(cue) {
		return strings.Contains(lower, cue)
	}
	if prefix, ok := strings.CutSuffix(cue, "*"); ok {
		for _, w := range words {
			if strings.HasPrefix(w, prefix) {
				return true
			}
		}
		return false
	}
	return strings.Contains(joined, " "+cue+" ")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// NewSignature is the signature of a goal with the entity types it
// involves.
func NewSignature(goal string, entityTypes []string) Signature {
	return Signature{TaskType: ClassifyTask(goal), EntityTypes: normalize(entityTypes)}
}
