package complexity

import (
	"cmp"
	"slices"
	"unicode/utf8"
)

// entity is a kind of business thing a request mentions.
type entity uint8

const (
	entityRevenue entity = iota + 1
	entityCost
	entityProfit
	entityRegion
	entityChannel
	entityProduct
	entityCustomer
	entityOrder
	entityEmployee
	entityStore
	entitySupplier
	entityInventory
	entityMarket
	entityCampaign
)

// connectors are the English words that join explicit requests.
var connectors = map[string]bool{
	"and": true, "also": true, "plus": true, "additionally": true, "furthermore": true,
	"moreover": true, "then": true, "besides": true,
}

// analysisWords maps analysis keywords to a canonical name, so that
// "analyse" and "analysis" count once.
var analysisWords = map[string]string{
	"analyse": "analyse", "analyze": "analyse", "analysis": "analyse", "analyses": "analyse", "analyzing": "analyse", "analysing": "analyse",
	"compare": "compare", "comparison": "compare", "comparing": "compare", "versus": "compare", "vs": "compare",
	"comprehensive": "comprehensive", "overall": "comprehensive", "holistic": "comprehensive",
	"report": "report", "reports": "report", "summary": "report", "summarize": "report", "summarise": "report",
	"trend": "trend", "trends": "trend",
	"breakdown":   "breakdown",
	"correlation": "correlate", "correlate": "correlate",
	"forecast": "forecast", "predict": "forecast", "projection": "forecast",
	"evaluate": "evaluate", "assess": "evaluate", "assessment": "evaluate", "review": "evaluate",
	"recommend": "recommend", "recommendations": "recommend",
}

// entityWords maps English nouns to the entity type they name.
var entityWords = map[string]entity{
	"revenue": entityRevenue, "revenues": entityRevenue, "sales": entityRevenue, "turnover": entityRevenue, "income": entityRevenue,
	"cost": entityCost, "costs": entityCost, "expense": entityCost, "expenses": entityCost, "spend": entityCost, "spending": entityCost,
	"profit": entityProfit, "profits": entityProfit, "margin": entityProfit, "margins": entityProfit,
	"region": entityRegion, "regions": entityRegion, "regional": entityRegion, "country": entityRegion, "countries": entityRegion, "city": entityRegion, "cities": entityRegion,
	"channel": entityChannel, "channels": entityChannel,
	"product": entityProduct, "products": entityProduct, "category": entityProduct, "categories": entityProduct, "sku": entityProduct, "skus": entityProduct,
	"customer": entityCustomer, "customers": entityCustomer, "client": entityCustomer, "clients": entityCustomer, "users": entityCustomer,
	"order": entityOrder, "orders": entityOrder,
	"employee": entityEmployee, "employees": entityEmployee, "staff": entityEmployee, "headcount": entityEmployee,
	"store": entityStore, "stores": entityStore, "branch": entityStore, "branches": entityStore,
	"supplier": entitySupplier, "suppliers": entitySupplier, "vendor": entitySupplier, "vendors": entitySupplier,
	"inventory": entityInventory, "stock": entityInventory,
	"market": entityMarket, "markets": entityMarket,
	"campaign": entityCampaign, "campaigns": entityCampaign, "marketing": entityCampaign,
}

// timeUnits are the units of a span (last 6 months).
var timeUnits = map[string]bool{
	"day": true, "days": true, "week": true, "weeks": true, "month": true, "months": true,
	"quarter": true, "quarters": true, "year": true, "years": true,
}

// spanLead are the words that open a span.
var spanLead = map[string]bool{"last": true, "past": true, "previous": true, "next": true, "recent": true, "trailing": true, "this": true}

// countWords are counts spelled out.
var countWords = map[string]bool{
	"two": true, "three": true, "four": true, "five": true, "six": true, "seven": true, "eight": true,
	"nine": true, "ten": true, "eleven": true, "twelve": true, "several": true, "few": true,
}

// hanKind is what a Chinese keyword signals.
type hanKind uint8

const (
	hanNone     hanKind = iota // consumed so that a shorter keyword inside does not match (总和)
	hanRequest                 // 和, 另外, 还有
	hanAnalysis                // 分析, 比较
	hanEntity                  // 收入, 地区
	hanSpan                    // 同比, 环比
	hanRecent                  // 过去, 最近, 近: a span when a count and unit follow
	hanQuarter                 // 三季度, 上半年
)

type hanKeyword struct {
	text   string
	kind   hanKind
	canon  string // analysis
	entity entity // entity
}

// hanKeywords holds the Chinese keywords by their first character, longest
// first, so that a scan tries only the few that can match where it is.
var hanKeywords = func() map[rune][]hanKeyword {
	var all []hanKeyword
	add := func(kind hanKind, words ...string) {
		for _, w := range words {
			all = append(all, hanKeyword{text: w, kind: kind})
		}
	}
	add(hanNone, "总和", "和平", "并不", "同时间")
	add(hanRequest, "和", "以及", "另外", "还有", "并且", "同时", "然后", "此外", "再者")
	add(hanSpan, "同比", "环比", "年初至今", "逐月", "逐季", "逐年", "历年")
	add(hanRecent, "过去", "最近", "近")
	add(hanQuarter, "一季度", "二季度", "三季度", "四季度", "第一季度", "第二季度", "第三季度", "第四季度", "上半年", "下半年", "上季度", "本季度", "去年", "今年", "明年")
	for w, c := range map[string]string{
		"分析": "analyse", "比较": "compare", "对比": "compare", "综合": "comprehensive", "全面": "comprehensive",
		"报告": "report", "报表": "report", "总结": "report", "汇总": "report", "趋势": "trend", "评估": "evaluate",
		"预测": "forecast", "归因": "correlate", "复盘": "evaluate", "洞察": "analyse", "建议": "recommend",
	} {
		all = append(all, hanKeyword{text: w, kind: hanAnalysis, canon: c})
	}
	for w, e := range map[string]entity{
		"收入": entityRevenue, "营收": entityRevenue, "销售额": entityRevenue, "销售": entityRevenue, "销量": entityRevenue, "营业额": entityRevenue,
		"成本": entityCost, "费用": entityCost, "支出": entityCost,
		"利润": entityProfit, "毛利": entityProfit, "利润率": entityProfit,
		"地区": entityRegion, "区域": entityRegion, "大区": entityRegion, "省份": entityRegion, "城市": entityRegion,
		"渠道": entityChannel,
		"产品": entityProduct, "品类": entityProduct, "商品": entityProduct, "类别": entityProduct,
		"客户": entityCustomer, "用户": entityCustomer,
		"订单": entityOrder,
		"员工": entityEmployee, "人员": entityEmployee,
		"门店": entityStore, "店铺": entityStore,
		"供应商": entitySupplier,
		"库存":  entityInventory,
		"市场":  entityMarket,
		"活动":  entityCampaign, "营销": entityCampaign,
	} {
		all = append(all, hanKeyword{text: w, kind: hanEntity, entity: e})
	}
	m := map[rune][]hanKeyword{}
	for _, k := range all {
		r, _ := utf8.DecodeRuneInString(k.text)
		m[r] = append(m[r], k)
	}
	for r := range m {
		slices.SortStableFunc(m[r], func(a, b hanKeyword) int {
			return cmp.Or(cmp.Compare(len(b.text), len(a.text)), cmp.Compare(a.text, b.text))
		})
	}
	return m
}()
