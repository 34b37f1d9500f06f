package conformance

import (
	"context"
	"errors"

	"github.com/toolrelay/toolrelay/core"
)

// The seeds' functions, used by the scenarios.

type locationArgs struct {
	Location string `json:"location" jsonschema:"The city and state, e.g. San Francisco, CA"`
}

type weatherArgs struct {
	Location string `json:"location" jsonschema:"The city and state, e.g. San Francisco, CA"`
	Unit     string `json:"unit,omitempty"`
}

func favoriteCity(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }

func cityNickname(_ context.Context, in locationArgs) (string, error) {
	if in.Location != "Seattle, WA" {
		return "", errors.New("not implemented for " + in.Location)
	}
	return "The Emerald City", nil
}

func currentWeather(_ context.Context, in weatherArgs) (string, error) {
	if in.Location != "Seattle, WA" {
		return "", core.ModelErrorf("no weather data for %s", in.Location)
	}
	if in.Unit == "c" {
		return "21c", nil
	}
	return "70f", nil
}

func weatherTools(e *env) []*core.Tool {
	return []*core.Tool{
		tool(e, "getUserFavoriteCity", "Gets the user's favorite city.", favoriteCity, nil),
		tool(e, "getCityNickname", "Gets the nickname of a city, e.g. 'LA' for 'Los Angeles, CA'.", cityNickname, nil),
		tool(e, "getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", currentWeather,
			&core.ToolOptions{Fields: map[string]core.Field{"unit": {Enum: []any{"c", "f"}, Default: "f"}}}),
	}
}

type customerArgs struct {
	CustomerID string `json:"customer_id"`
}

type customer struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

type customerResult struct {
	Found    bool      `json:"found"`
	Customer *customer `json:"customer"`
}

func getCustomer(_ context.Context, in customerArgs) (customerResult, error) {
	if in.CustomerID == "123" {
		return customerResult{Found: true, Customer: &customer{Name: "Example Customer", Plan: "pro"}}, nil
	}
	return customerResult{}, nil
}
