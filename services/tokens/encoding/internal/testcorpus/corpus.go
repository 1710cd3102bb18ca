// Package testcorpus generates, deterministically from a seed, the texts the
// encoder's differential tests and benchmarks run on. Only tests import it.
package testcorpus

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// atoms are the pre-tokenizer's hard cases: case and category corners,
// contractions (and look-alikes: long s, Kelvin sign, right quote), digits
// of several scripts, every kind of whitespace, scripts, emoji with ZWJ and
// modifiers, punctuation runs, special-token text, and characters new in
// Unicode 15.1/16.0 (letters, marks, digits for tiktoken) and 17.0
// (unassigned for tiktoken 1.0.22 and Go alike).
var atoms = []string{
	"a", "B", "hello", "World", "THE", "ǅ", "ʰ", "ſ", "K", "é", "e\u0301", "ß", "İ", "ﬀ", "ΣΑΣ", "ǈa",
	"'s", "'S", "'t", "'RE", "'ve", "'M", "'ll", "'D", "'ſ", "'K", "’s", "'", "''", "'Ll", "'lL",
	"0", "12", "345", "6789", "٣", "１２", "²", "Ⅻ", "½", "𝟘",
	" ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2028", "\u3000", "\u200b", "\u200d", "\ufeff", "\u1680",
	"中文", "日本語", "カタカナ", "한국어", "Ёжик", "ελληνικά", "עברית", "العربية", "हिन्दी", "ไทย",
	"😀", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "❤️", "\U0001F9D1\u200d\U0001F4BB",
	".", ",", "!", "?", "...", "/", "//", "/*", "{", "}", "()", "=>", "<|", "|>", "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "\ufffd",
	"\u0300", "\u0903", "\u20dd", "\u0301A", "A\u0301b",
	"\U0002EBF0", "\U00010D4A", "\U00016D40", "\u1C89", "\uA7CB", "\U00011390", "\U000116D0", "\U00010D40", "\U0001E5F1", "\u0897",
	"\U00016EA0", "\U00010940", "\U00011DB0",
}

// Atoms returns n strings, each a concatenation of 1 to maxAtoms hard cases.
func Atoms(seed uint64, n, maxAtoms int) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := 1 + rng.IntN(maxAtoms); k > 0; k-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		out[i] = b.String()
	}
	return out
}

var (
	englishWords = strings.Fields(`the of and to in is that it was for on are as with his they at be this from have or by one
		had not but what all were when we there can an your which their said if do will each about how up out them then she many
		some so these would other into has more her two like him see time could no make than first been its who now people my made
		over did down only way find use may water long little very after words called just where most know Tokenizer encoding
		context window budget quarterly revenue analysis dataset pipeline Kubernetes deployment throughput latency don't it's
		we're they've I'm you'll she'd O'Brien McDonald's GPT-4o self-hosted state-of-the-art e-mail naïve café résumé`)
	chineseWords = strings.Fields(`我们 正在 构建 一个 支持 多租户 的 智能体 平台 数据 分析 报告 用户 查询 结果 模型 上下文 窗口
		令牌 计数 服务 部署 性能 测试 文档 系统 架构 设计 实现 优化 缓存 请求 响应 错误 处理 日志 监控 指标 季度 收入 增长 市场`)
	japaneseWords = strings.Fields(`こんにちは 世界 東京 晴れ です カタカナ ひらがな 漢字 データ 分析 を 行い ます 結果 は 次 の 通り`)
	koreanWords   = strings.Fields(`안녕하세요 세계 데이터 분석 결과 는 다음 과 같습니다 서울 날씨 토큰 계산`)
	arabicWords   = strings.Fields(`مرحبا بالعالم تحليل البيانات النتائج كما يلي الرياض الطقس حساب الرموز`)
	punct         = []string{". ", ", ", "! ", "? ", "; ", ": ", " — ", " (", ") ", "\"", "'", "...", "\n", "\n\n"}
	chinesePunct  = []string{"，", "。", "、", "：", "；", "！", "？", "（", "）", "《", "》", "\n"}
)

// Snippets of code in several languages, joined with random identifiers.
var codeSnippets = []string{
	"func (s *Server) CountTokens(ctx context.Context, req *pb.CountRequest) (*pb.CountResponse, error) {\n\tif err := validate.Text(req.GetText()); err != nil {\n\t\treturn nil, status.Error(codes.InvalidArgument, err.Error())\n\t}\n",
	"\tfor i := 0; i < len(parts); i++ {\n\t\tids = append(ids, uint32(r))\n\t}\n\treturn ids, nil\n}\n\n",
	"def merge(ranks: dict[bytes, int], piece: bytes) -> list[int]:\n    parts = [piece[i:i+1] for i in range(len(piece))]\n    while True:\n        pass  # TODO\n",
	"const fetchData = async (url) => {\n  const res = await fetch(url, { headers: { 'Content-Type': 'application/json' } });\n  return res.json();\n};\n",
	"fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u32> = (0..100).map(|x| x * 2).collect();\n    println!(\"{:?}\", v);\n    Ok(())\n}\n",
	"SELECT customer_id, SUM(amount) AS total\nFROM orders\nWHERE created_at >= '2024-01-01'\nGROUP BY customer_id\nORDER BY total DESC LIMIT 10;\n",
	"#include <stdio.h>\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
	"    \n\t\n  \r\n", "// 0x1F600 0o755 1_000_000 3.14e-10\n", "<div class=\"row\"><span>&nbsp;</span></div>\n",
	"{\"id\": 123, \"name\": \"naïve\", \"tags\": [\"a\", \"b\"], \"ok\": true}\n",
}

// Mixed returns about n bytes of text mixing every kind of content: prose in
// English, Chinese, Japanese, Korean and Arabic, code in several languages,
// emoji, runs of whitespace and digits, the hard cases, and random code
// points from all planes (assigned or not, but no surrogates).
func Mixed(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 11))
	var b strings.Builder
	for b.Len() < n {
		switch rng.IntN(12) {
		case 0, 1:
			b.WriteString(sentence(rng, englishWords, punct, " ", 4+rng.IntN(20)))
		case 2:
			b.WriteString(sentence(rng, chineseWords, chinesePunct, "", 4+rng.IntN(30)))
		case 3:
			b.WriteString(sentence(rng, japaneseWords, chinesePunct, "", 3+rng.IntN(12)))
		case 4:
			b.WriteString(sentence(rng, koreanWords, punct, " ", 3+rng.IntN(10)))
		case 5:
			b.WriteString(sentence(rng, arabicWords, punct, " ", 3+rng.IntN(10)))
		case 6, 7:
			b.WriteString(codeSnippets[rng.IntN(len(codeSnippets))])
		case 8:
			b.WriteString(atoms[rng.IntN(len(atoms))])
		case 9:
			ws := []string{" ", "\t", "\n", "\r\n", "\u3000", "\u00a0"}
			for k := rng.IntN(40); k > 0; k-- {
				b.WriteString(ws[rng.IntN(len(ws))])
			}
		case 10:
			for k := 1 + rng.IntN(30); k > 0; k-- {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		case 11:
			for k := 1 + rng.IntN(8); k > 0; k-- {
				b.WriteRune(randomRune(rng))
			}
		}
	}
	return b.String()
}

// randomRune returns a random valid code point, half of them in the BMP.
func randomRune(rng *rand.Rand) rune {
	for {
		var r rune
		if rng.IntN(2) == 0 {
			r = rune(rng.IntN(0x10000))
		} else {
			r = rune(rng.IntN(utf8.MaxRune + 1))
		}
		if utf8.ValidRune(r) {
			return r
		}
	}
}

func sentence(rng *rand.Rand, words, punct []string, sep string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(sep)
		}
		w := words[rng.IntN(len(words))]
		if i == 0 && sep == " " {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		if rng.IntN(8) == 0 {
			b.WriteString(punct[rng.IntN(len(punct))])
		}
	}
	b.WriteString(punct[rng.IntN(len(punct))])
	return b.String()
}

// Bench returns the benchmark corpus: about n bytes of English prose,
// Chinese Markdown and Go source in equal parts, cut into chunks of about
// chunk bytes at character boundaries.
func Bench(seed uint64, n, chunk int) []string {
	rng := rand.New(rand.NewPCG(seed, 13))
	var b strings.Builder
	for b.Len() < n {
		switch rng.IntN(3) {
		case 0:
			for range 5 {
				b.WriteString(sentence(rng, englishWords, punct[:6], " ", 8+rng.IntN(20)))
				b.WriteString(" ")
			}
			b.WriteString("\n\n")
		case 1:
			b.WriteString("## " + sentence(rng, chineseWords, chinesePunct[1:2], "", 3+rng.IntN(4)) + "\n\n")
			for range 3 {
				b.WriteString("- " + sentence(rng, chineseWords, chinesePunct[:6], "", 8+rng.IntN(25)) + "\n")
			}
			b.WriteString("\n")
		case 2:
			b.WriteString(codeSnippets[rng.IntN(2)])
			b.WriteString("\n// " + sentence(rng, englishWords, punct[:1], " ", 6) + "\n")
		}
	}
	text := b.String()
	var chunks []string
	for len(text) > 0 {
		end := min(chunk, len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		chunks = append(chunks, text[:end])
		text = text[end:]
	}
	return chunks
}
