// Argo CD's health check VM, as Argo CD sets it up for resource.customizations.health scripts:
// a fresh gopher-lua state with only the base, package, table, string and math libraries (no
// io or os), the object as the global `obj` (JSON objects and arrays as tables, arrays from
// index 1), and the script's returned table read as {status, message}. Argo CD accepts only
// these statuses; anything else is an error there, so it is one here.
package main

import (
	lua "github.com/yuin/gopher-lua"
)

var argoStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

func toLua(state *lua.LState, value interface{}) lua.LValue {
	switch typed := value.(type) {
	case map[string]interface{}:
		table := state.NewTable()
		for key, item := range typed {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	case []interface{}:
		table := state.NewTable()
		for _, item := range typed {
			table.Append(toLua(state, item))
		}
		return table
	case string:
		return lua.LString(typed)
	case float64:
		return lua.LNumber(typed)
	case bool:
		return lua.LBool(typed)
	default:
		return lua.LNil
	}
}

func argoHealth(script string, object map[string]interface{}) verdict {
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		state.Push(state.NewFunction(lib.open))
		state.Push(lua.LString(lib.name))
		state.Call(1, 0)
	}
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(script); err != nil {
		return verdict{Error: err.Error()}
	}
	table, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		return verdict{Error: "the script returned no table"}
	}
	status := lua.LVAsString(table.RawGetString("status"))
	message := lua.LVAsString(table.RawGetString("message"))
	if !argoStatuses[status] {
		return verdict{Status: status, Message: message, Error: "not a health status Argo CD knows: " + status}
	}
	return verdict{Status: status, Message: message}
}
