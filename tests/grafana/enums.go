package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// enumSpec is the closed set of values an SDK enum type allows.
type enumSpec struct {
	allowed map[any]bool
	listed  string
}

// enumSpecs holds, for the SDK enum types a dashboard of time series panels on Prometheus
// can contain, the values Grafana's schema allows, taken from the SDK's own constants.
// The SDK's Go types keep only the underlying string or integer of an enum, so its strict
// decode accepts any value there (a legend displayMode "lists" decodes cleanly); this
// table is what catches such typos. Enums whose schema leaves them open (field color
// modes, for one) are deliberately absent.
var enumSpecs = map[reflect.Type]enumSpec{}

func registerEnum[T comparable](values ...T) {
	spec := enumSpec{allowed: map[any]bool{}}
	var names []string
	for _, v := range values {
		spec.allowed[v] = true
		names = append(names, fmt.Sprintf("%v", v))
	}
	spec.listed = strings.Join(names, ", ")
	enumSpecs[reflect.TypeOf(values[0])] = spec
}

func init() {
	registerEnum(dashboard.DashboardCursorSyncOff, dashboard.DashboardCursorSyncCrosshair, dashboard.DashboardCursorSyncTooltip)
	registerEnum(dashboard.VariableRefreshNever, dashboard.VariableRefreshOnDashboardLoad, dashboard.VariableRefreshOnTimeRangeChanged)
	registerEnum(dashboard.VariableHideDontHide, dashboard.VariableHideHideLabel, dashboard.VariableHideHideVariable, dashboard.VariableHideInControlsMenu)
	registerEnum(dashboard.VariableSortDisabled, dashboard.VariableSortAlphabeticalAsc, dashboard.VariableSortAlphabeticalDesc,
		dashboard.VariableSortNumericalAsc, dashboard.VariableSortNumericalDesc, dashboard.VariableSortAlphabeticalCaseInsensitiveAsc,
		dashboard.VariableSortAlphabeticalCaseInsensitiveDesc, dashboard.VariableSortNaturalAsc, dashboard.VariableSortNaturalDesc)
	registerEnum(dashboard.VariableTypeQuery, dashboard.VariableTypeAdhoc, dashboard.VariableTypeGroupby, dashboard.VariableTypeConstant,
		dashboard.VariableTypeDatasource, dashboard.VariableTypeInterval, dashboard.VariableTypeTextbox, dashboard.VariableTypeCustom,
		dashboard.VariableTypeSystem, dashboard.VariableTypeSnapshot, dashboard.VariableTypeSwitch)
	registerEnum(dashboard.ThresholdsModeAbsolute, dashboard.ThresholdsModePercentage)
	registerEnum(dashboard.PanelRepeatDirectionH, dashboard.PanelRepeatDirectionV)
	registerEnum(dashboard.DashboardLinkTypeLink, dashboard.DashboardLinkTypeDashboards)

	registerEnum(common.LegendDisplayModeList, common.LegendDisplayModeTable, common.LegendDisplayModeHidden)
	registerEnum(common.LegendPlacementBottom, common.LegendPlacementRight)
	registerEnum(common.TooltipDisplayModeSingle, common.TooltipDisplayModeMulti, common.TooltipDisplayModeNone)
	registerEnum(common.SortOrderAscending, common.SortOrderDescending, common.SortOrderNone)
	registerEnum(common.GraphDrawStyleLine, common.GraphDrawStyleBars, common.GraphDrawStylePoints)
	registerEnum(common.LineInterpolationLinear, common.LineInterpolationSmooth, common.LineInterpolationStepBefore, common.LineInterpolationStepAfter)
	registerEnum(common.VisibilityModeAuto, common.VisibilityModeNever, common.VisibilityModeAlways)
	registerEnum(common.StackingModeNone, common.StackingModeNormal, common.StackingModePercent)
	registerEnum(common.AxisPlacementAuto, common.AxisPlacementTop, common.AxisPlacementRight, common.AxisPlacementBottom,
		common.AxisPlacementLeft, common.AxisPlacementHidden)
	registerEnum(common.AxisColorModeText, common.AxisColorModeSeries)
	registerEnum(common.GraphGradientModeNone, common.GraphGradientModeOpacity, common.GraphGradientModeHue, common.GraphGradientModeScheme)
	registerEnum(common.ScaleDistributionLinear, common.ScaleDistributionLog, common.ScaleDistributionOrdinal, common.ScaleDistributionSymlog)
	registerEnum(common.BarAlignmentBefore, common.BarAlignmentCenter, common.BarAlignmentAfter)
	registerEnum(common.GraphTransformConstant, common.GraphTransformNegativeY)

	registerEnum(prometheus.PromQueryFormatTimeSeries, prometheus.PromQueryFormatTable, prometheus.PromQueryFormatHeatmap)
	registerEnum(prometheus.QueryEditorModeBuilder, prometheus.QueryEditorModeCode)
}

// enums reports every value of a type in enumSpecs, anywhere in v (a decoded dashboard or
// part of one), that its enum does not allow. path is v's JSON path.
func (c *checker) enums(path string, v reflect.Value) {
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		c.enums(path, v.Elem())
		return
	}
	if spec, ok := enumSpecs[v.Type()]; ok {
		if !spec.allowed[v.Interface()] {
			c.report("%s: %q is not one of the schema's values (%s)", path, fmt.Sprint(v.Interface()), spec.listed)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			child := path
			// Members of the SDK's union types (PanelOrRowPanel.Panel, ...) are Go names,
			// not JSON keys: the union is the JSON value itself.
			if name != "" && !unicode.IsUpper(rune(name[0])) {
				child = joinPath(path, name)
			}
			c.enums(child, v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			c.enums(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			c.enums(joinPath(path, fmt.Sprint(k)), v.MapIndex(k))
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
